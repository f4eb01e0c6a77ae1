"""The two-layer net in TensorFlow: `tensors` (hand-written gradients) and `autograd` (GradientTape),
each a tf.function (XLA-compiled for `tensorflow-xla`, eager for `tensorflow-eager`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.frameworks.tensorflow_fw import compile_step, tf_device
from dlperf.workloads.base import Step
from dlperf.workloads.mlp import MlpParams


def build(fw: Framework, device: str, p: MlpParams) -> Step:
    variant, dtype, state, lr = p.variant, p.dtype, p.initial_state(), p.lr
    if variant not in ("tensors", "autograd"):
        raise UnsupportedError(f"TensorFlow has no {variant!r} variant (custom autograd Functions are PyTorch's)")
    tf = fw.import_module()
    dt = getattr(tf, dtype)
    dev = tf_device(device)
    with tf.device(dev):
        x, y = (tf.constant(state[k], dtype=dt) for k in ("x", "y"))
        w1, w2 = (tf.Variable(tf.constant(state[k], dtype=dt)) for k in ("w1", "w2"))

    if variant == "tensors":
        def train() -> Any:
            h = tf.matmul(x, w1)
            h_relu = tf.maximum(h, 0)
            diff = tf.matmul(h_relu, w2) - y
            grad_y_pred = 2.0 * diff
            grad_w2 = tf.matmul(h_relu, grad_y_pred, transpose_a=True)
            grad_h = tf.where(h < 0, tf.zeros_like(h), tf.matmul(grad_y_pred, w2, transpose_b=True))
            grad_w1 = tf.matmul(x, grad_h, transpose_a=True)
            w1.assign_sub(lr * grad_w1)
            w2.assign_sub(lr * grad_w2)
            return tf.reduce_sum(diff**2)
    else:
        def train() -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum((tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2) - y) ** 2)
            g1, g2 = tape.gradient(loss, [w1, w2])
            w1.assign_sub(lr * g1)
            w2.assign_sub(lr * g2)
            return loss

    compiled = compile_step(fw, train)
    losses: list[Any] = []

    def step() -> Any:
        with tf.device(dev):
            loss = compiled()
        losses.append(loss)
        return loss

    return Step(step, lambda: np.array([float(v) for v in losses]))
