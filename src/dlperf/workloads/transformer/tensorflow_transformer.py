"""The transformer workload in Keras 3 on TensorFlow: a training step, a forward pass, or greedy generation.

`tensorflow` wraps the step (train, infer) and generation's prefill and decode step in `tf.function` (no XLA),
`tensorflow-eager` runs them op by op. Training: `keras.optimizers.AdamW` (Keras' defaults: beta_1 0.9,
beta_2 0.999, epsilon 1e-7; weight decay on every variable), the loss in float32. Precision: fp32 runs all in
float32 and switches TensorFloat-32 off around each call on a GPU (TensorFlow's switch is process-wide, so it is
set for the call and restored after); bf16/fp16 give this model a Keras "mixed_bfloat16"/"mixed_float16" policy
(float32 master weights; a Keras policy computes every layer in the low dtype, so the embeddings, residual stream,
layer-norm outputs and GELU are bf16/fp16 too, where torch's autocast keeps the residual stream and layer norms in
float32: the same FLOPs, less memory traffic and a lower-precision residual), fp16 with a `LossScaleOptimizer`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.frameworks.tensorflow_fw import compile_step, tf_device
from dlperf.models.transformer import init_weights, make_labels, make_tokens
from dlperf.workloads.base import Step, check_predict_n
from dlperf.workloads.keras_steps import train_step
from dlperf.workloads.transformer import TransformerParams

POLICY = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def check_precision(tf: Any, device: str, precision: str) -> None:
    """UnsupportedError where the device cannot run the precision's matrix products."""
    if precision != "bf16" or not device.startswith("cuda"):
        return  # CPUs run bfloat16 (oneDNN or Eigen) and float16 (Eigen) products; every CUDA GPU runs float16
    gpus = tf.config.list_physical_devices("GPU")
    index = int(device.partition(":")[2] or 0)
    cc = tf.config.experimental.get_device_details(gpus[index]).get("compute_capability") if index < len(gpus) else None
    if cc is not None and tuple(cc) < (8, 0):
        raise UnsupportedError(f"bf16 needs a GPU of compute capability 8.0 or more (Ampere); {device} has "
                               f"{cc[0]}.{cc[1]}")


def no_tf32(tf: Any, device: str, precision: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """A context that keeps float32 products in float32 on a GPU during a call (fp32 only)."""

    @contextlib.contextmanager
    def off() -> Iterator[None]:
        before = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        try:
            yield
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(before)

    return off if precision == "fp32" and device.startswith("cuda") else contextlib.nullcontext


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    """The step of `p` on the preset's seed-0 weights (`init_weights(cfg, 0)`)."""
    return build_with_weights(fw, device, p, None)


def build_with_weights(fw: Framework, device: str, p: TransformerParams,
                       weights: dict[str, np.ndarray] | None) -> Step:
    """The step of `p` on `weights` (None: `init_weights(cfg, 0)`), e.g. a torch model's (the model workload's
    twin): the builder contract's `build` is (fw, device, p), so the weights come in here."""
    tf = fw.import_module()
    import keras

    from dlperf.models.transformer import tensorflow_model as tm

    cfg, dev, graph = p.config(), tf_device(device), bool(getattr(fw, "graph", True))
    check_precision(tf, device, p.precision)
    weights = init_weights(cfg, 0) if weights is None else weights
    model = tm.build(cfg, weights, device=device, policy=POLICY[p.precision])
    exact = no_tf32(tf, device, p.precision)
    if p.task == "generate":
        assert p.prompt_len is not None and p.new_tokens is not None
        with tf.device(dev):
            gen = tm.Generator(model, p.batch, p.prompt_len, p.new_tokens, kv_cache=p.kv_cache, graph=graph,
                               jit_compile=bool(getattr(fw, "jit_compile", False)))
            prompt = tf.constant(make_tokens(cfg, p.batch, p.prompt_len).astype(np.int32))
        phases: list[dict[str, float]] = []
        generated: list[np.ndarray] = []

        def generate() -> np.ndarray:
            with tf.device(dev), exact():
                tokens, times = gen(prompt)
            phases.append(times)
            generated[:] = [tokens]
            return tokens

        return Step(generate, lambda: generated[0].astype(np.float64) if generated else np.array([]),
                    call_phases=lambda: list(phases))

    assert p.seq_len is not None
    with tf.device(dev):
        if cfg.kind == "decoder":
            data = make_tokens(cfg, p.batch, p.seq_len + (p.task == "train")).astype(np.int32)
            x = tf.constant(data[:, :p.seq_len])
            y = tf.constant(data[:, 1:]) if p.task == "train" else None
        else:
            x = tf.constant(make_tokens(cfg, p.batch, p.seq_len).astype(np.int32))
            y = tf.constant(make_labels(cfg, p.batch).astype(np.int32))

    predict: Callable[[int], np.ndarray] | None = None
    if p.task == "infer":
        def apply(tokens: Any) -> Any:
            return model(tokens)

        # tf.function traces once per input shape: `predict`'s first call of each new n traces again
        applied = compile_step(fw, apply)
        firsts: dict[int, Any] = {}  # the first n sequences, sliced once per n

        def forward() -> Any:
            return applied(x)

        def predict(n: int) -> np.ndarray:
            """The logits of the first n sequences, float32 on the host (.numpy() waits for the device)."""
            n = check_predict_n(n, p.batch)
            with tf.device(dev), exact():
                if n not in firsts:
                    firsts[n] = x if n == p.batch else x[:n]
                return tf.cast(applied(firsts[n]), tf.float32).numpy()

        run: Callable[[], Any] = forward
    else:
        with tf.device(dev):
            opt = keras.optimizers.AdamW(learning_rate=p.lr, weight_decay=p.weight_decay)
            if p.precision == "fp16":
                opt = keras.optimizers.LossScaleOptimizer(opt)
            opt.build(model.trainable_variables)
        run = train_step(tf, model, opt, x, y, scaled=p.precision == "fp16")
    compiled = run if p.task == "infer" else compile_step(fw, run)  # infer: `applied` is the tf.function
    last: list[Any] = [None]

    def step() -> Any:
        with tf.device(dev), exact():
            last[0] = compiled()
        return last[0]

    def result() -> np.ndarray:
        if last[0] is None:
            return np.array([])
        out = np.asarray(tf.cast(last[0], tf.float32).numpy(), np.float64)
        return out.reshape(1) if out.ndim == 0 else out  # the loss as one value, or the logits

    return Step(step, result, predict=predict)
