"""Peaks in TensorFlow: tf.function graphs over non-trainable Variables; copy is `DeepCopy`."""

from __future__ import annotations

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.peaks import TRIAD_SCALAR, PeaksParams, inputs


def build(fw: Framework, device: str, p: PeaksParams) -> Step:
    tf = fw.import_module()
    from dlperf.frameworks.tensorflow_fw import tf_device

    dev = tf_device(device)
    with tf.device(dev):
        x = {k: tf.Variable(v, trainable=False) for k, v in inputs(p).items()}
        if p.kind == "gemm":
            f = tf.function(lambda: tf.matmul(x["a"], x["b"]))
        elif p.kind == "copy":
            # identity, assign and `+ 0` all alias the buffer (seen: "copies" at 2.7 TB/s);
            # DeepCopy really copies, into a buffer it allocates each call.
            f = tf.function(lambda: tf.raw_ops.DeepCopy(x=x["a"].read_value()))
        else:
            f = tf.function(lambda: x["b"] + TRIAD_SCALAR * x["c"])

    def step() -> object:
        with tf.device(dev):
            return f()

    return Step(step)
