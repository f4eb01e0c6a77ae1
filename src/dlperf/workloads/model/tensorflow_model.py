"""The model workload in TensorFlow/Keras: dlperf's own models (`twin`), in the adapter's mode, which is the case's
variant: `eager` op by op (`tensorflow-eager`), `graph` a tf.function (`tensorflow`), `xla` a tf.function XLA
compiles whole (`tensorflow-xla`, jit_compile=True), through `tensorflow_fw.compile_step` as the shipped workloads.

- CNNs: the cnn workload's Keras model with the torch net's weights (`copy_from_torch`), its inputs as NHWC;
  infer is the cnn workload's inference step (`tensorflow_cnn.infer_step`: the logits on the host each call);
  train its Keras training step (`keras_steps.train_step`: SGD at the model workload's lr, cross-entropy on seeded
  labels), FLOPs counted by torch on its own training step of the same net.
- gpt2-tiny and the other presets: the transformer workload's builder (`tensorflow_transformer.build`) with the
  torch source's weights: infer (logits), train (its AdamW step), generate (greedy, KV cache).
- study 000's net: x @ w1 -> ReLU -> @ w2 on the torch Linear layers' weights, infer.
- fp32 on a GPU: every call with TF32 off (`tensorflow_transformer.no_tf32`; TensorFlow's default runs float32
  products in TF32 on Ampere and later, about 1e-3 of the scale off, which the fp32 gate fails).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.frameworks.tensorflow_fw import compile_step, tf_device
from dlperf.models import get_spec, tensorflow_models
from dlperf.sources.dlperf_source import PREFIX
from dlperf.workloads.base import Step
from dlperf.workloads.cnn.tensorflow_cnn import infer_step
from dlperf.workloads.keras_steps import train_step
from dlperf.workloads.model import ModelParams, gate, training, twin
from dlperf.workloads.model import prepare as prep
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.step import ModelStep
from dlperf.workloads.transformer import tensorflow_transformer
from dlperf.workloads.transformer.tensorflow_transformer import no_tf32


def build(fw: Framework, device: str, p: ModelParams) -> Step:
    what = twin.check("tensorflow", p)
    seed = twin.seed_of(fw)
    info: ModelInfo = twin.base_info(p)
    if what == "transformer":
        return twin.transformer_step("tensorflow",
                                     lambda tp, w: tensorflow_transformer.build_with_weights(fw, device, tp, w), p,
                                     seed, info)
    ref = twin.torch_reference(p, seed)
    info |= {"param_count": ref.params, "model_info": ref.loaded.info, "flops_per_call": ref.flops}
    if what == "cnn":
        return _cnn(fw, device, p, ref, info)
    return _mlp(fw, device, p, ref, info)


def _cnn(fw: Framework, device: str, p: ModelParams, ref: twin.Reference, info: ModelInfo) -> Step:
    tf = fw.import_module()
    import keras

    spec = get_spec(p.source[len(PREFIX):])
    dev = tf_device(device)
    with tf.device(dev):
        model = tensorflow_models.build(spec)
        tensorflow_models.copy_from_torch(spec, model, ref.module)
        x = tf.constant(twin.first_input(ref).transpose(0, 2, 3, 1))
    exact = no_tf32(tf, device, p.precision)
    if p.task == "infer":
        step = infer_step(fw, model, x, dev)
        predict = step.predict

        def infer() -> Any:
            with exact():
                return step.fn()

        def first(n: int) -> object:
            assert predict is not None  # the cnn workload's inference step serves
            with exact():
                return predict(n)

        return ModelStep(infer, step.result, predict=first,
                         info=info | {"gate": twin.gate_of(ref, lambda: [step.result()] if step.result else [])})
    import torch

    run = training.sgd_step(torch, ref.module, ref.loaded, ref.args, {}, "cpu", None)
    info["flops_per_call"] = prep.count_flops(torch, lambda: run(ref.module))  # torch's count of the same step
    labels = np.random.default_rng(1).integers(0, spec.num_classes, int(x.shape[0]))
    with tf.device(dev):
        y = tf.constant(labels, dtype=tf.int32)
        opt = keras.optimizers.SGD(learning_rate=training.LR)
        opt.build(model.trainable_variables)
    compiled = compile_step(fw, train_step(tf, model, opt, x, y, scaled=False))
    last: list[Any] = [None]

    def fn() -> Any:
        with tf.device(dev), exact():
            last[0] = compiled()
        return last[0]

    why = gate.not_checked("a training step changes the weights; the Keras step is checked by task infer's "
                           "forward (the loss is Keras' cross-entropy on seeded labels)")
    return ModelStep(fn, lambda: np.array([float(last[0])]) if last[0] is not None else np.array([]),
                     info=info | {"gate": lambda: why})


def _mlp(fw: Framework, device: str, p: ModelParams, ref: twin.Reference, info: ModelInfo) -> Step:
    tf = fw.import_module()
    dev, exact = tf_device(device), no_tf32(tf, device, p.precision)
    first, second = twin.mlp_weights(ref)
    with tf.device(dev):
        w1, w2 = tf.Variable(first), tf.Variable(second)
        x = tf.constant(twin.first_input(ref))

    def forward() -> Any:
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)

    compiled = compile_step(fw, forward)
    last: list[Any] = [None]

    def fn() -> Any:
        with tf.device(dev), exact():
            last[0] = compiled()
        return last[0]

    def result() -> np.ndarray:
        return np.array([]) if last[0] is None else np.asarray(last[0].numpy(), dtype=np.float64)

    return ModelStep(fn, result, info=info | {"gate": twin.gate_of(ref, lambda: [result()])})
