"""The transformer in JAX with Flax linen: GPT-2's decoder and BERT's encoder, loading the canonical weights.

Why linen (not nnx): a linen module is a pure function `apply({"params": params}, ...)` of a plain pytree, so
it composes directly with `jax.jit` (donated buffers), `jax.grad` and optax, and the canonical weights map onto
that pytree by a name rule (`h0.attn_qkv_w` -> params["h0"]["attn_qkv"]["kernel"]): no mutable object graph to
split and merge around every jitted step. Dense kernels are stored (in, out) in Flax too, so nothing is transposed.

Precision: `dtype` is the compute dtype of the matrix products (float32, or bfloat16/float16 for mixed
precision); parameters are always float32 (`param_dtype`), layer norms, softmax and the loss run in float32.
In float32 every product asks for `lax.Precision.HIGHEST`, so a GPU does not use TF32 (XLA's GPU default); on
CPU that is XLA's default anyway.

Attention is `jax.nn.dot_product_attention` with implementation=None, which in jax 0.10.2 is always XLA's
implementation (the (B, heads, T, S) float32 logits are materialised, softmax in float32; it picks cuDNN only
when asked by name, and cuDNN takes float16/bfloat16 only), so the memory report assumes the math path for jax.
XLA's CPU dot takes no float16 inputs with float32 logits, so a float16 model's attention runs in float32 on
CPU.

Generation is greedy (argmax, ties to the lowest id), the head only on the last position, and runs the lengths
`cost.generate_flops` counts:
- with a KV cache: the cache (per layer (B, prompt + new tokens, heads, head_dim) keys and values, `KVCache`) is
  allocated once (`new_cache`; the workload does it once per case, outside the timed calls) and donated to a
  jitted prefill, which runs the prompt causally over itself (P x P, as counted) and writes its keys and values
  at 0; then one jitted decode step of fixed shapes per token writes at the position (a traced scalar, so
  decoding compiles once) and attends over the whole preallocated cache with `key_value_seq_lengths` = position
  + 1: later slots, empty or stale from an earlier call, are masked. That fixed-shape step does the attention of
  `prompt + new_tokens` keys where cost.py counts `prompt + j`: 4 L B d (new_tokens - j) FLOPs more per step.
  Measured with XLA's cost analysis on gpt2-tiny (B=1, P=16, N=16), where XLA's count also includes the
  element-wise work cost.py counts 0 (layer norm, GELU, softmax: the forward of the prompt is 1.037x cost.py):
  prefill 1.054x, the last decode step 1.061x, the whole cached call 1.065x cost.py;
- without: each token runs the sequence again at its exact length (the first step the prompt alone), one
  compilation per length, all in the first call (which dlperf reports apart); the whole call is 1.051x cost.py
  by XLA's count, the element-wise share alone (tests/models/test_transformer_model_jax.py checks it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dlperf.models.transformer.config import TransformerConfig, check_weights, init_weights, weight_shapes

_SUFFIX = {"w": "kernel", "b": "bias", "g": "scale"}


def _precision(dtype: Any) -> Any:
    return lax.Precision.HIGHEST if jnp.dtype(dtype) == jnp.float32 else None


class Block(nn.Module):
    """One transformer block: pre-LN (decoder) or post-LN (encoder) attention and MLP.

    Attention is `jax.nn.dot_product_attention` (implementation=None) over (B, T, heads, head_dim): causal for
    a decoder's own chunk; with `kv` it writes the chunk's keys and values at `start` and then either attends
    over the chunk itself (prefill, `kv_len` None) or over the cache's first `kv_len` keys (a decode step:
    `key_value_seq_lengths`, the later slots, stale or empty, are masked)."""

    cfg: TransformerConfig
    dtype: Any = jnp.float32
    attention_dtype: Any = None  # of q, k, v in the attention (None: `dtype`)

    @nn.compact
    def __call__(self, x: jax.Array, kv: tuple[jax.Array, jax.Array] | None, start: Any,
                 kv_len: jax.Array | None) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
        cfg, prec = self.cfg, _precision(self.dtype)
        dense = {"dtype": self.dtype, "param_dtype": jnp.float32, "precision": prec}
        ln = {"epsilon": cfg.layer_norm_eps, "dtype": jnp.float32, "use_fast_variance": False}
        ln1, ln2 = nn.LayerNorm(**ln, name="ln1"), nn.LayerNorm(**ln, name="ln2")
        qkv_proj = nn.Dense(3 * cfg.d_model, **dense, name="attn_qkv")
        out_proj = nn.Dense(cfg.d_model, **dense, name="attn_out")
        fc = nn.Dense(cfg.ff, **dense, name="mlp_fc")
        proj = nn.Dense(cfg.d_model, **dense, name="mlp_proj")

        def attention(h: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
            b, t, _ = h.shape
            q, k, v = (a.reshape(b, t, cfg.n_head, cfg.head_dim) for a in jnp.split(qkv_proj(h), 3, axis=-1))
            new_kv, lengths = None, None
            if kv is not None:  # write this chunk's keys and values at `start`
                new_kv = (lax.dynamic_update_slice(kv[0], k.astype(kv[0].dtype), (0, start, 0, 0)),
                          lax.dynamic_update_slice(kv[1], v.astype(kv[1].dtype), (0, start, 0, 0)))
                if kv_len is not None:  # a decode step: the query against the cache's first kv_len keys
                    k, v = new_kv
                    lengths = jnp.broadcast_to(kv_len, (b,)).astype(jnp.int32)
            at = self.attention_dtype or q.dtype
            with jax.default_matmul_precision("highest" if prec is not None else None):
                out = jax.nn.dot_product_attention(
                    q.astype(at), k.astype(at), v.astype(at), is_causal=cfg.kind == "decoder" and lengths is None,
                    key_value_seq_lengths=lengths, implementation=None)
            return out_proj(out.astype(self.dtype).reshape(b, t, cfg.d_model)), new_kv

        def mlp(h: jax.Array) -> jax.Array:
            return proj(nn.gelu(fc(h), approximate=cfg.gelu == "tanh"))

        if cfg.kind == "decoder":
            a, new_kv = attention(ln1(x))
            x = x + a
            return x + mlp(ln2(x)), new_kv
        a, new_kv = attention(x)
        x = ln1(x + a)
        return ln2(x + mlp(x)), new_kv


class FlaxTransformer(nn.Module):
    """The whole model. `start` is the position of the first token (a traced scalar in decoding); `cache` the
    per-layer (k, v) arrays (B, max_len, heads, head_dim) to write the tokens' keys and values into; `kv_len`
    None: attend over the tokens themselves (forward, prefill), else over the cache's first `kv_len` keys (a
    decode step); `head_at` the one position whose logits a decoder returns (None: every position)."""

    cfg: TransformerConfig
    dtype: Any = jnp.float32
    attention_dtype: Any = None

    @nn.compact
    def __call__(self, tokens: jax.Array, token_types: jax.Array | None = None, *, start: Any = 0,
                 cache: tuple[tuple[jax.Array, jax.Array], ...] | None = None,
                 kv_len: Any = None,
                 head_at: Any = None) -> tuple[jax.Array, tuple[tuple[jax.Array, jax.Array], ...] | None]:
        cfg, prec = self.cfg, _precision(self.dtype)
        t = tokens.shape[1]
        emb = {"param_dtype": jnp.float32, "dtype": jnp.float32}
        tok_emb = nn.Embed(cfg.vocab_size, cfg.d_model, **emb, name="tok_emb")
        pos_emb = nn.Embed(cfg.max_positions, cfg.d_model, **emb, name="pos_emb")
        x = tok_emb(tokens) + pos_emb(start + jnp.arange(t))[None]
        ln = {"epsilon": cfg.layer_norm_eps, "dtype": jnp.float32, "use_fast_variance": False}
        if cfg.kind != "decoder":
            types = jnp.zeros_like(tokens) if token_types is None else token_types
            x = x + nn.Embed(cfg.type_vocab_size, cfg.d_model, **emb, name="type_emb")(types)
            x = nn.LayerNorm(**ln, name="emb_ln")(x)
        new_cache = []
        for i in range(cfg.n_layer):
            block = Block(cfg, self.dtype, self.attention_dtype, name=f"h{i}")
            x, kv = block(x, None if cache is None else cache[i], start, kv_len)
            new_cache.append(kv)
        out_cache = tuple(new_cache) if cache is not None else None
        if cfg.kind == "decoder":
            x = nn.LayerNorm(**ln, name="lnf")(x)
            if head_at is not None:
                x = lax.dynamic_slice_in_dim(x, head_at, 1, axis=1)
            emb_matrix = tok_emb.embedding.astype(self.dtype)  # the tied head
            return jnp.einsum("btd,vd->btv", x.astype(self.dtype), emb_matrix, precision=prec), out_cache
        dense = {"dtype": self.dtype, "param_dtype": jnp.float32, "precision": prec}
        pooled = jnp.tanh(nn.Dense(cfg.d_model, **dense, name="pooler")(x[:, 0]))
        return nn.Dense(cfg.num_labels, **dense, name="cls")(pooled), None


def param_path(name: str) -> tuple[str, ...]:
    """The pytree path of a canonical weight: `h0.attn_qkv_w` -> ("h0", "attn_qkv", "kernel"),
    `tok_emb` -> ("tok_emb", "embedding"), `lnf_g` -> ("lnf", "scale")."""
    block, _, leaf = name.rpartition(".")
    head = (block,) if block else ()
    module, _, suffix = leaf.rpartition("_")
    if suffix == "emb":
        return (*head, leaf, "embedding")
    return (*head, module, _SUFFIX[suffix])


@dataclass
class JaxTransformer:
    """A built model: the Flax module, its float32 params on `device`, and its jitted functions (made once,
    so repeated calls reuse their compilations). `traces` counts how often each function was traced."""

    cfg: TransformerConfig
    module: FlaxTransformer
    params: Any
    device: Any
    dtype: Any
    traces: Counter[str] = field(default_factory=Counter)
    fns: dict[str, Callable[..., Any]] = field(default_factory=dict)


def _device(device: Any) -> Any:
    """A jax Device from "cpu"/"cuda:N" through the adapter (which switches GPU pre-allocation off before the
    backend starts; importing jax above does not start it)."""
    if not isinstance(device, str):
        return device
    from dlperf.frameworks import get_framework

    return get_framework("jax").jax_device(device)  # type: ignore[attr-defined]


def build(cfg: TransformerConfig, weights: dict[str, np.ndarray] | None = None, *, device: Any = "cpu",
          dtype: Any = "float32") -> JaxTransformer:
    """The model with `weights` (default `init_weights(cfg, 0)`) on `device` ("cpu", "cuda:0" or a jax Device);
    `dtype` is the compute dtype of the matrix products (params stay float32)."""
    weights = init_weights(cfg, 0) if weights is None else weights
    check_weights(cfg, weights)
    dev = _device(device)
    # XLA's CPU dot cannot take float16 inputs with float32 logits (F16_F16_F32), which dot_product_attention
    # asks for: there the float16 model's attention runs in float32 (CPU float16 is emulated anyway)
    cpu_f16 = jnp.dtype(dtype) == jnp.float16 and dev.platform == "cpu"
    module = FlaxTransformer(cfg, jnp.dtype(dtype), jnp.dtype(jnp.float32) if cpu_f16 else None)
    tree: dict[str, Any] = {}
    for name, w in weights.items():
        *parents, leaf = param_path(name)
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = np.asarray(w, dtype=np.float32)
    shapes = param_shapes(module)
    if jax.tree.structure(shapes) != jax.tree.structure(tree):
        raise ValueError("the weights do not map onto the Flax module's parameters")
    params = jax.device_put(tree, dev)
    model = JaxTransformer(cfg, module, params, dev, jnp.dtype(dtype))
    _make_functions(model)
    return model


def param_shapes(module: FlaxTransformer, batch: int = 1, length: int = 2) -> Any:
    """The module's parameter pytree as shapes only (`jax.eval_shape`: nothing is allocated)."""
    tokens = jax.ShapeDtypeStruct((batch, length), jnp.int32)
    return jax.eval_shape(module.init, jax.random.key(0), tokens)["params"]


def to_weights(model: JaxTransformer) -> dict[str, np.ndarray]:
    """The canonical float32 arrays of the model's params."""
    out = {}
    for name in weight_shapes(model.cfg):
        node = model.params
        for key in param_path(name):
            node = node[key]
        out[name] = np.asarray(node, dtype=np.float32)
    return out


def _make_functions(model: JaxTransformer) -> None:
    """The jitted forward, prefill, decode step and no-cache step of `model` (each counts its traces)."""
    module, traces = model.module, model.traces

    def apply(params: Any, tokens: jax.Array, **kw: Any) -> Any:
        return module.apply({"params": params}, tokens, **kw)

    def greedy(logits: jax.Array) -> jax.Array:
        return jnp.argmax(logits[:, -1].astype(jnp.float32), axis=-1).astype(jnp.int32)

    def forward(params: Any, tokens: jax.Array) -> jax.Array:
        traces["forward"] += 1
        return apply(params, tokens)[0]

    def prefill(params: Any, cache: Any, prompt: jax.Array) -> tuple[jax.Array, Any]:
        traces["prefill"] += 1
        logits, cache = apply(params, prompt, cache=cache, head_at=prompt.shape[1] - 1)
        return greedy(logits), cache

    def decode(params: Any, cache: Any, token: jax.Array, pos: jax.Array) -> tuple[jax.Array, Any]:
        traces["decode"] += 1
        logits, cache = apply(params, token[:, None], start=pos, cache=cache, kv_len=pos + 1, head_at=0)
        return greedy(logits), cache

    def step_nocache(params: Any, buf: jax.Array, length: int) -> tuple[jax.Array, jax.Array]:
        traces["nocache"] += 1
        logits, _ = apply(params, buf[:, :length], head_at=length - 1)
        token = greedy(logits)
        return token, buf.at[:, length].set(token)

    model.fns.update(
        forward=jax.jit(forward),
        prefill=jax.jit(prefill, donate_argnums=1),
        decode=jax.jit(decode, donate_argnums=1),
        nocache=jax.jit(step_nocache, static_argnames="length", donate_argnums=1),
    )


@dataclass
class KVCache:
    """The per-layer (keys, values) buffers (batch, length, heads, head_dim) of one generation shape, allocated
    once (`new_cache`) and reused: each generation donates them to its prefill and keeps the returned ones."""

    batch: int
    length: int
    buffers: Any


def new_cache(model: JaxTransformer, batch: int, length: int) -> KVCache:
    """A zeroed cache on the model's device for `batch` sequences of up to `length` tokens (compute dtype)."""
    shape = (batch, length, model.cfg.n_head, model.cfg.head_dim)

    def zeros() -> jax.Array:
        return jnp.zeros(shape, model.dtype, device=model.device)

    return KVCache(batch, length, tuple((zeros(), zeros()) for _ in range(model.cfg.n_layer)))


def logits(model: JaxTransformer, tokens: np.ndarray) -> np.ndarray:
    """float32 logits: (B, T, vocab) for a decoder, (B, num_labels) for an encoder."""
    x = jax.device_put(jnp.asarray(np.asarray(tokens), dtype=jnp.int32), model.device)
    return np.asarray(model.fns["forward"](model.params, x), dtype=np.float32)


def generate_on_device(model: JaxTransformer, prompt: jax.Array, new_tokens: int, *, kv_cache: bool,
                       on_first: Callable[[jax.Array], None] | None = None,
                       cache: KVCache | None = None) -> jax.Array:
    """Greedy tokens (B, new_tokens) int32 on the device, dispatched asynchronously; `on_first(token)` is called
    with token 1 as soon as it is dispatched (a caller that times the first token blocks on it there). With
    `kv_cache`, `cache` (of this batch and prompt + new_tokens, from `new_cache`) is reused, else one is made."""
    if model.cfg.kind != "decoder":
        raise ValueError("only a decoder generates")
    b, p = prompt.shape
    total = p + new_tokens
    if total > model.cfg.max_positions:
        raise ValueError(f"{total} tokens exceed the context of {model.cfg.max_positions}")
    fns, params, out = model.fns, model.params, []
    if kv_cache:
        cache = new_cache(model, b, total) if cache is None else cache
        if (cache.batch, cache.length) != (b, total):
            raise ValueError(f"the cache holds {cache.batch} x {cache.length} tokens, not {b} x {total}")
        token, buffers = fns["prefill"](params, cache.buffers, prompt)
        out.append(token)
        if on_first:
            on_first(token)
        for j in range(1, new_tokens):
            token, buffers = fns["decode"](params, buffers, token, p + j - 1)
            out.append(token)
        cache.buffers = buffers  # the donated buffers, kept for the next call
    else:
        buf = jnp.zeros((b, total), jnp.int32, device=model.device).at[:, :p].set(prompt)
        for j in range(new_tokens):
            token, buf = fns["nocache"](params, buf, length=p + j)
            out.append(token)
            if j == 0 and on_first:
                on_first(token)
    return jnp.stack(out, axis=1)


def generate(model: JaxTransformer, prompt: np.ndarray, new_tokens: int, *, kv_cache: bool) -> np.ndarray:
    """Greedy decoding: (B, new_tokens) int64 token ids."""
    x = jax.device_put(jnp.asarray(np.asarray(prompt), dtype=jnp.int32), model.device)
    return np.asarray(generate_on_device(model, x, new_tokens, kv_cache=kv_cache), dtype=np.int64)
