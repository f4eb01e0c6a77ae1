"""The ops in TensorFlow, as a tf.function graph (`tensorflow`) or eagerly (`tensorflow-eager`).

Inputs are tf.Variables, so graph optimisation cannot fold the op into a
constant. conv2d runs in NHWC, the layout TensorFlow supports on CPU; the
result is transposed back to NCHW only when checked, never while timed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.frameworks.tensorflow_fw import tf_device
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
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
    a, b = x["a"], x.get("b")
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
    }
    body = bodies[op]
    graph = getattr(fw, "graph", True)
    compiled = tf.function(body) if graph else body
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
