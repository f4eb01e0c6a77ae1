"""The transformer workload in JAX/Flax (`models.transformer.jax_model`): train, infer, generate, all jitted.

- train: one jitted step (value_and_grad, optax.adamw with optax's defaults b1=0.9, b2=0.999, eps=1e-8, weight
  decay on every parameter as torch's AdamW does), params and optimizer state donated so XLA updates them in
  place. Mixed precision (bf16/fp16): the model computes its matrix products in the low dtype, params, gradients
  and AdamW's state stay float32. fp16 adds dynamic loss scaling (torch GradScaler's defaults: 2**16, halved
  and the update skipped on an inf/NaN gradient, doubled after 2000 clean steps); bf16 needs none.
  fp32 asks every product for `Precision.HIGHEST` (no TF32 on a GPU).
- infer: the jitted forward pass (all logits); `Step.predict(n)` runs it on the first n sequences (in the
  adapter's mode: `jax-nojit` runs it with jit disabled, as `prepare` does the timed step).
- generate: greedy decoding with or without the KV cache (one `jax_model.KVCache` allocated when the step is
  built, donated to every call's prefill and kept from it); each call records {"ttft_s", "decode_s"}: the clock
  reads after token 1 is ready on the device (block_until_ready) and after the last one.
Inputs and weights are put on `fw.jax_device(device)` before timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.models.transformer import init_weights, make_labels, make_tokens
from dlperf.workloads.base import Step, check_predict_n
from dlperf.workloads.transformer import TransformerParams

#: fp16 dynamic loss scaling (torch.amp.GradScaler's defaults).
INIT_SCALE, GROWTH_INTERVAL = 2.0**16, 2000


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    """The step of `p` on the preset's seed-0 weights (`init_weights(cfg, 0)`)."""
    return build_with_weights(fw, device, p, None)


def build_with_weights(fw: Framework, device: str, p: TransformerParams,
                       weights: dict[str, np.ndarray] | None) -> Step:
    """The step of `p` on `weights` (None: `init_weights(cfg, 0)`), e.g. a torch model's (the model workload's
    twin): the builder contract's `build` is (fw, device, p), so the weights come in here."""
    fw.import_module()
    from dlperf.models.transformer import jax_model

    cfg = p.config()
    weights = init_weights(cfg, 0) if weights is None else weights
    model = jax_model.build(cfg, weights, device=fw.jax_device(device), dtype=p.dtype)  # type: ignore[attr-defined]
    if p.task == "train":
        return _train(model, p)
    if p.task == "infer":
        return _infer(model, p, fw.mode)  # type: ignore[attr-defined]
    return _generate(model, p)


def _put(model: Any, a: np.ndarray) -> Any:
    import jax
    import jax.numpy as jnp

    return jax.device_put(jnp.asarray(a, dtype=jnp.int32), model.device)


def _infer(model: Any, p: TransformerParams, mode: Callable[[], AbstractContextManager[Any]]) -> Step:
    assert p.seq_len is not None
    tokens = _put(model, make_tokens(model.cfg, p.batch, p.seq_len))
    forward, params, kept = model.fns["forward"], model.params, [None]

    def step() -> Any:
        kept[0] = forward(params, tokens)
        return kept[0]

    firsts: dict[int, Any] = {}  # the first n sequences on the device, sliced once per n

    def predict(n: int) -> np.ndarray:
        """The logits of the first n sequences as float32 NumPy (np.asarray waits for the device). The jitted
        forward compiles once per input shape: the first call of each new n compiles, later ones reuse it."""
        n = check_predict_n(n, p.batch)
        if n not in firsts:
            firsts[n] = tokens if n == p.batch else tokens[:n]
        with mode():
            return np.asarray(forward(params, firsts[n]), dtype=np.float32)

    return Step(step, lambda: np.asarray(kept[0], dtype=np.float64), predict=predict)


def _train(model: Any, p: TransformerParams) -> Step:
    import jax
    import jax.numpy as jnp
    import optax

    assert p.seq_len is not None
    cfg, module = model.cfg, model.module
    if cfg.kind == "decoder":
        seq = make_tokens(cfg, p.batch, p.seq_len + 1)
        x, y = _put(model, seq[:, :-1]), _put(model, seq[:, 1:])
    else:
        x, y = _put(model, make_tokens(cfg, p.batch, p.seq_len)), _put(model, make_labels(cfg, p.batch))
    tx = optax.adamw(p.lr, weight_decay=p.weight_decay)
    scaling = p.precision == "fp16"

    def loss_fn(params: Any) -> Any:
        logits = module.apply({"params": params}, x)[0].astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def train_step(params: Any, opt_state: Any, scale: Any) -> tuple[Any, Any, Any, Any]:
        if not scaling:
            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, scale, loss
        value, clean = scale
        loss, grads = jax.value_and_grad(lambda q: loss_fn(q) * value)(params)
        grads = jax.tree.map(lambda g: g / value, grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
        updates, new_state = tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)

        def keep(new: Any, old: Any) -> Any:  # a step with an inf/NaN gradient changes nothing
            return jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)

        clean = jnp.where(finite, clean + 1, 0)
        grow = clean >= GROWTH_INTERVAL
        value = jnp.where(finite, jnp.where(grow, value * 2.0, value), value * 0.5)
        return (keep(new_params, params), keep(new_state, opt_state), (value, jnp.where(grow, 0, clean)),
                loss / scale[0])

    jitted = jax.jit(train_step, donate_argnums=(0, 1, 2))
    params, model.params = model.params, None  # the step donates them: no second copy on the device
    state = [params, jax.device_put(tx.init(params), model.device),
             jax.device_put((jnp.float32(INIT_SCALE), jnp.int32(0)), model.device), None]

    def step() -> Any:
        state[0], state[1], state[2], state[3] = jitted(state[0], state[1], state[2])
        return state[3]

    return Step(step, lambda: np.array([float(state[3])]) if state[3] is not None else np.array([]))


def _generate(model: Any, p: TransformerParams) -> Step:
    from dlperf.models.transformer import jax_model

    assert p.prompt_len is not None and p.new_tokens is not None
    prompt = _put(model, make_tokens(model.cfg, p.batch, p.prompt_len))
    new_tokens, kv_cache = p.new_tokens, p.kv_cache
    # allocated once per case, outside the timed calls; each call donates it to its prefill and keeps the result
    cache = jax_model.new_cache(model, p.batch, p.prompt_len + new_tokens) if kv_cache else None
    phases: list[dict[str, float]] = []
    kept: list[Any] = [None]

    def step() -> Any:
        start = time.perf_counter()
        first = [start]

        def on_first(token: Any) -> None:
            token.block_until_ready()
            first[0] = time.perf_counter()

        out = jax_model.generate_on_device(model, prompt, new_tokens, kv_cache=kv_cache, on_first=on_first,
                                          cache=cache)
        out.block_until_ready()
        end = time.perf_counter()
        phases.append({"ttft_s": first[0] - start, "decode_s": end - first[0]})
        kept[0] = out
        return out

    return Step(step, lambda: np.asarray(kept[0], dtype=np.float64), call_phases=lambda: [dict(d) for d in phases])
