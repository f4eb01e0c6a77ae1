"""The model workload in JAX: dlperf's own models (`twin`), in the adapter's mode, which is the case's variant:
`jit` (`jax`: the step's jitted functions compiled by XLA) or `eager` (`jax-nojit`: every call inside
`jax.disable_jit()`, so the same functions run op by op; JAX's no-jit, also named `no-jit`).

- gpt2-tiny and the other presets: the transformer workload's builder (`jax_transformer.build`, Flax) with the
  torch source's weights: infer (logits), train (its optax AdamW step), generate (greedy, KV cache).
- study 000's net: x @ w1 -> ReLU -> @ w2 (fp32 products at Precision.HIGHEST), one jitted function, on the torch
  Linear layers' weights, infer.
- CNNs: dlperf has no JAX CNN (`unsupported`).
A step built by a direct `Model.build` with the plain `jax` adapter for `eager` enters `jax.disable_jit()` itself
(`Model.build`); a worker runs it with `jax-nojit`, whose `prepare` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams, twin
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.step import ModelStep
from dlperf.workloads.transformer import jax_transformer


def build(fw: Framework, device: str, p: ModelParams) -> Step:
    what = twin.check("jax", p)  # mlp or transformer: dlperf has no JAX CNN
    seed = twin.seed_of(fw)
    info: ModelInfo = twin.base_info(p)
    if what == "transformer":
        return twin.transformer_step("jax", lambda tp, w: jax_transformer.build_with_weights(fw, device, tp, w), p,
                                     seed, info)
    ref = twin.torch_reference(p, seed)  # study 000's net runs infer only (twin.check)
    info |= {"param_count": ref.params, "model_info": ref.loaded.info, "flops_per_call": ref.flops}
    return _mlp(fw, device, ref, info)


def _mlp(fw: Framework, device: str, ref: twin.Reference, info: ModelInfo) -> Step:
    jax = fw.import_module()
    jnp = jax.numpy
    dev = fw.jax_device(device)  # type: ignore[attr-defined]
    first, second = twin.mlp_weights(ref)
    w1, w2, x = (jax.device_put(jnp.asarray(a), dev) for a in (first, second, twin.first_input(ref)))

    def forward(w1: Any, w2: Any, x: Any) -> Any:
        return jnp.dot(jnp.maximum(jnp.dot(x, w1, precision="highest"), 0.0), w2, precision="highest")

    jitted = jax.jit(forward)
    last: list[Any] = [None]

    def fn() -> Any:
        last[0] = jitted(w1, w2, x)
        return last[0]

    def result() -> np.ndarray:
        return np.array([]) if last[0] is None else np.asarray(last[0], dtype=np.float64)

    return ModelStep(fn, result, info=info | {"gate": twin.gate_of(ref, lambda: [result()])})
