"""The ops in TensorFlow, as a tf.function graph (`tensorflow`), compiled by XLA (`tensorflow-xla`) or eagerly
(`tensorflow-eager`).

Inputs are tf.Variables, so graph optimisation cannot fold the op into a
constant. conv2d runs in NHWC, the layout TensorFlow supports on CPU; the
result is transposed back to NCHW only when checked, never while timed.
attention is written out (q k^T, scale, mask, tf.nn.softmax, times v: the math backend; TensorFlow
has no fused attention op of its own), layernorm with tf.nn.moments, gelu is tf.nn.gelu(approximate=True).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.frameworks.tensorflow_fw import compile_step, tf_device
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import LAYERNORM_EPS, SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    tf = fw.import_module()
    dt = getattr(tf, dtype)
    dev = tf_device(device)
    arrays = dict(inputs)
    if op == "conv2d":
        arrays["a"] = inputs["a"].transpose(0, 2, 3, 1)  # NCHW -> NHWC
        arrays["w"] = inputs["w"].transpose(2, 3, 1, 0)  # KCRS -> RSCK (HWIO)
    with tf.device(dev):
        x = {k: tf.Variable(tf.cast(tf.constant(v), dt), trainable=False) for k, v in arrays.items()}
        s = tf.constant(SCALAR, dtype=dt)
        body = _attention(tf, x, dt, bool(p.causal)) if op == "attention" else _bodies(tf, x, s, op)
    compiled = compile_step(fw, body)
    kept: list[Any] = [None]

    def step() -> Any:
        with tf.device(dev):
            kept[0] = compiled()
        return kept[0]

    def result() -> np.ndarray:
        out = tf.cast(kept[0], tf.float64).numpy()
        return out.transpose(0, 3, 1, 2) if op == "conv2d" else out

    def array_nbytes() -> dict[str, int]:  # the output exists once the step ran
        return {k: int(v.shape.num_elements()) * v.dtype.size for k, v in {**x, "out": kept[0]}.items()}

    return Step(step, result, array_nbytes=array_nbytes)


def _attention(tf: Any, x: dict[str, Any], dt: Any, causal: bool) -> Any:
    q, k, v = x["q"], x["k"], x["v"]
    t, d = int(q.shape[-2]), int(q.shape[-1])
    scale = tf.constant(1.0 / np.sqrt(d), dtype=dt)
    keep = tf.constant(np.tril(np.ones((t, t), dtype=bool))) if causal else None
    low = tf.constant(-np.inf, dtype=dt)

    def attention() -> Any:
        scores = tf.matmul(q, k, transpose_b=True) * scale
        if keep is not None:
            scores = tf.where(keep, scores, low)
        return tf.matmul(tf.nn.softmax(scores, axis=-1), v)

    return attention


def _bodies(tf: Any, x: dict[str, Any], s: Any, op: str) -> Any:
    a, b = x["a"], x.get("b")

    def layernorm() -> Any:
        mean, var = tf.nn.moments(a, axes=[-1], keepdims=True)
        return (a - mean) * tf.math.rsqrt(var + LAYERNORM_EPS) * x["g"] + b

    bodies = {
        "add": lambda: tf.add(a, b),
        "mul": lambda: tf.multiply(a, b),
        "scalar": lambda: tf.multiply(a, s),
        "sigmoid": lambda: tf.sigmoid(a),
        "tanh": lambda: tf.tanh(a),
        "relu": lambda: tf.nn.relu(a),
        "softmax": lambda: tf.nn.softmax(a, axis=1),
        "dot": lambda: tf.matmul(a, b),
        "conv2d": lambda: tf.nn.conv2d(a, x["w"], strides=1, padding="SAME"),
        "layernorm": layernorm,
        "gelu": lambda: tf.nn.gelu(a, approximate=True),
    }
    return bodies[op]
