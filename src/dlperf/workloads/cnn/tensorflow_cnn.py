"""The CNN in TensorFlow/Keras (NHWC; tf.function for `tensorflow`, with XLA for `tensorflow-xla`,
eager for `tensorflow-eager`: `compile_step`).

Training: one GradientTape step. Inference (`task: infer`): the model called with training=False (dropout off),
the logits cast to float32 and copied to the host (`.numpy()`, which waits for the device); `Step.predict` does
the same for the first n images. `amp` sets Keras' mixed_float16 policy on a GPU (with loss scaling when
training) and mixed_bfloat16 on a CPU; the loss and the returned logits are float32 either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.frameworks.tensorflow_fw import compile_step, tf_device
from dlperf.models import tensorflow_models
from dlperf.workloads.base import Step, check_predict_n
from dlperf.workloads.cnn import CnnParams
from dlperf.workloads.keras_steps import train_step


def build(fw: Framework, device: str, p: CnnParams) -> Step:
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
        rng = np.random.default_rng(0)
        x = tf.constant(rng.standard_normal((p.batch, size, size, model_spec.in_channels), dtype=np.float32))
        y = tf.constant(rng.integers(0, p.classes(), p.batch), dtype=tf.int32)
    if p.task == "infer":
        return infer_step(fw, model, x, dev)
    with tf.device(dev):
        opt = keras.optimizers.SGD(learning_rate=p.lr, momentum=p.momentum)
        if p.precision == "amp" and on_gpu:
            opt = keras.mixed_precision.LossScaleOptimizer(opt)
        opt.build(model.trainable_variables)
    train = train_step(tf, model, opt, x, y, scaled=isinstance(opt, keras.mixed_precision.LossScaleOptimizer))
    compiled = compile_step(fw, train)
    last: list[Any] = [None]

    def step() -> Any:
        with tf.device(dev):
            last[0] = compiled()
        return last[0]

    return Step(step, lambda: np.array([float(last[0])]) if last[0] is not None else np.array([]))


def infer_step(fw: Framework, model: Any, x: Any, dev: str) -> Step:
    """The inference step of a built Keras `model` on the NHWC batch `x` (also the model workload's twin)."""
    tf = fw.import_module()
    batch = int(x.shape[0])

    def forward(inputs: Any) -> Any:
        return tf.cast(model(inputs, training=False), tf.float32)

    # tf.function traces once per input shape: the full batch once, and each new n of `predict` once more (its
    # first call is slower, later calls of that n reuse the trace)
    compiled = compile_step(fw, forward)
    firsts: dict[int, Any] = {}  # the first n images, sliced once per n (outside later calls)
    last: list[np.ndarray | None] = [None]

    def run(inputs: Any) -> np.ndarray:
        with tf.device(dev):
            return compiled(inputs).numpy()  # on the host: .numpy() waits for the device

    def step() -> np.ndarray:
        last[0] = run(x)
        return last[0]

    def predict(n: int) -> np.ndarray:
        n = check_predict_n(n, batch)
        if n not in firsts:
            with tf.device(dev):
                firsts[n] = x if n == batch else x[:n]
        return run(firsts[n])

    return Step(step, lambda: np.array([]) if last[0] is None else last[0].astype(np.float64), predict=predict)
