"""The CNN training step in TensorFlow/Keras (NHWC; GradientTape; tf.function or eager).

`amp` sets Keras' mixed_float16 policy on a GPU (with loss scaling) and
mixed_bfloat16 on a CPU; the loss is computed in float32 either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.frameworks.tensorflow_fw import tf_device
from dlperf.models import tensorflow_models
from dlperf.workloads.base import Step
from dlperf.workloads.cnn import CnnParams


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    if p.task != "train":
        raise UnsupportedError(f"cnn task {p.task!r} is not built for tensorflow yet")
    tf = fw.import_module()
    import keras

    model_spec = p.spec()
    size = p.size()
    dev = tf_device(device)
    on_gpu = device.startswith("cuda")
    previous = keras.mixed_precision.global_policy()
    if p.precision == "amp":  # layers take the policy when built; restored after, so nothing else inherits it
        keras.mixed_precision.set_global_policy("mixed_float16" if on_gpu else "mixed_bfloat16")
    with tf.device(dev):
        try:
            model = tensorflow_models.build(model_spec, p.image_size)
        finally:
            keras.mixed_precision.set_global_policy(previous)
        opt = keras.optimizers.SGD(learning_rate=p.lr, momentum=p.momentum)
        if p.precision == "amp" and on_gpu:
            opt = keras.mixed_precision.LossScaleOptimizer(opt)
        rng = np.random.default_rng(0)
        x = tf.constant(rng.standard_normal((p.batch, size, size, model_spec.in_channels), dtype=np.float32))
        y = tf.constant(rng.integers(0, p.classes(), p.batch), dtype=tf.int32)
        opt.build(model.trainable_variables)
    scaled = isinstance(opt, keras.mixed_precision.LossScaleOptimizer)

    def train() -> Any:
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            scaled_loss = opt.scale_loss(loss) if scaled else loss
        grads = tape.gradient(scaled_loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    compiled = tf.function(train) if getattr(fw, "graph", True) else train
    last: list[Any] = [None]

    def step() -> Any:
        with tf.device(dev):
            last[0] = compiled()
        return last[0]

    return Step(step, lambda: np.array([float(last[0])]) if last[0] is not None else np.array([]))
