"""The transformer in JAX with Flax linen: GPT-2's decoder and BERT's encoder, loading the canonical weights.

Why linen (not nnx): a linen module is a pure function `apply({"params": params}, ...)` of a plain pytree, so
it composes directly with `jax.jit` (donated buffers), `jax.grad` and optax, and the canonical weights map onto
that pytree by a name rule (`h0.attn_qkv_w` -> params["h0"]["attn_qkv"]["kernel"]): no mutable object graph to
split and merge around every jitted step. Dense kernels are stored (in, out) in Flax too, so nothing is transposed.

Precision: `dtype` is the compute dtype of the matrix products (float32, or bfloat16/float16 for mixed
precision); parameters are always float32 (`param_dtype`), layer norms, softmax and the loss run in float32.
In float32 every product asks for `lax.Precision.HIGHEST`, so a GPU does not use TF32 (XLA's GPU default); on
CPU that is XLA's default anyway.

Generation is greedy (argmax, ties to the lowest id), the head only on the last position:
- with a KV cache: a jitted prefill of the prompt (fills per-layer caches of the call's full length
  prompt + new tokens, preallocated), then one jitted decode step of fixed shapes per token (the cache is
  updated in place with `lax.dynamic_update_slice` and donated; keys not yet written are masked out, the
  position is a traced scalar), so decoding compiles once;
- without: each token runs the whole sequence again. To keep compilations few, the sequence is padded to a
  multiple of `NO_CACHE_BUCKET` tokens (at most the call's full length); the causal mask hides the padding from
  the position whose head is taken. Each length bucket compiles once (all in the first call), and a step does
  at most `NO_CACHE_BUCKET - 1` positions more work than `cost.generate_flops` counts.
"""

from __future__ import annotations

import math
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

#: Without a KV cache, sequences are padded to a multiple of this many tokens (one compilation per multiple).
NO_CACHE_BUCKET = 64
_SUFFIX = {"w": "kernel", "b": "bias", "g": "scale"}


def _precision(dtype: Any) -> Any:
    return lax.Precision.HIGHEST if jnp.dtype(dtype) == jnp.float32 else None


class Block(nn.Module):
    """One transformer block: pre-LN (decoder) or post-LN (encoder) attention and MLP."""

    cfg: TransformerConfig
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array | None, kv: tuple[jax.Array, jax.Array] | None,
                 start: Any) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
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
            new_kv = None
            if kv is not None:  # write this chunk's keys and values at `start`, attend over the whole cache
                k = lax.dynamic_update_slice(kv[0], k.astype(kv[0].dtype), (0, start, 0, 0))
                v = lax.dynamic_update_slice(kv[1], v.astype(kv[1].dtype), (0, start, 0, 0))
                new_kv = (k, v)
            scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=prec, preferred_element_type=jnp.float32)
            scores = scores / math.sqrt(cfg.head_dim)
            if mask is not None:
                scores = jnp.where(mask, scores, -jnp.inf)
            probs = jax.nn.softmax(scores, axis=-1).astype(self.dtype)
            out = jnp.einsum("bhqk,bkhd->bqhd", probs, v.astype(self.dtype), precision=prec)
            return out_proj(out.reshape(b, t, cfg.d_model)), new_kv

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
    per-layer (k, v) arrays (B, max_len, heads, head_dim) to write into and attend over; `head_at` the one
    position whose logits a decoder returns (None: every position)."""

    cfg: TransformerConfig
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array, token_types: jax.Array | None = None, *, start: Any = 0,
                 cache: tuple[tuple[jax.Array, jax.Array], ...] | None = None,
                 head_at: Any = None) -> tuple[jax.Array, tuple[tuple[jax.Array, jax.Array], ...] | None]:
        cfg, prec = self.cfg, _precision(self.dtype)
        t = tokens.shape[1]
        emb = {"param_dtype": jnp.float32, "dtype": jnp.float32}
        tok_emb = nn.Embed(cfg.vocab_size, cfg.d_model, **emb, name="tok_emb")
        pos_emb = nn.Embed(cfg.max_positions, cfg.d_model, **emb, name="pos_emb")
        x = tok_emb(tokens) + pos_emb(start + jnp.arange(t))[None]
        ln = {"epsilon": cfg.layer_norm_eps, "dtype": jnp.float32, "use_fast_variance": False}
        mask = None
        if cfg.kind == "decoder":
            keys = cache[0][0].shape[1] if cache is not None else t
            mask = (jnp.arange(keys)[None, :] <= start + jnp.arange(t)[:, None])[None, None]
        else:
            types = jnp.zeros_like(tokens) if token_types is None else token_types
            x = x + nn.Embed(cfg.type_vocab_size, cfg.d_model, **emb, name="type_emb")(types)
            x = nn.LayerNorm(**ln, name="emb_ln")(x)
        new_cache = []
        for i in range(cfg.n_layer):
            x, kv = Block(cfg, self.dtype, name=f"h{i}")(x, mask, None if cache is None else cache[i], start)
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
    module = FlaxTransformer(cfg, jnp.dtype(dtype))
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
    module, traces, dt = model.module, model.traces, model.dtype

    def apply(params: Any, tokens: jax.Array, **kw: Any) -> Any:
        return module.apply({"params": params}, tokens, **kw)

    def greedy(logits: jax.Array) -> jax.Array:
        return jnp.argmax(logits[:, -1].astype(jnp.float32), axis=-1).astype(jnp.int32)

    def forward(params: Any, tokens: jax.Array) -> jax.Array:
        traces["forward"] += 1
        return apply(params, tokens)[0]

    def prefill(params: Any, prompt: jax.Array, total: int) -> tuple[jax.Array, Any]:
        traces["prefill"] += 1
        b = prompt.shape[0]
        shape = (b, total, model.cfg.n_head, model.cfg.head_dim)
        empty = tuple((jnp.zeros(shape, dt), jnp.zeros(shape, dt)) for _ in range(model.cfg.n_layer))
        logits, cache = apply(params, prompt, cache=empty, head_at=prompt.shape[1] - 1)
        return greedy(logits), cache

    def decode(params: Any, cache: Any, token: jax.Array, pos: jax.Array) -> tuple[jax.Array, Any]:
        traces["decode"] += 1
        logits, cache = apply(params, token[:, None], start=pos, cache=cache, head_at=0)
        return greedy(logits), cache

    def step_nocache(params: Any, buf: jax.Array, cur: jax.Array, length: int) -> tuple[jax.Array, jax.Array]:
        traces["nocache"] += 1
        logits, _ = apply(params, buf[:, :length], head_at=cur - 1)
        token = greedy(logits)
        return token, lax.dynamic_update_slice(buf, token[:, None], (0, cur))

    model.fns.update(
        forward=jax.jit(forward),
        prefill=jax.jit(prefill, static_argnames="total"),
        decode=jax.jit(decode, donate_argnums=1),
        nocache=jax.jit(step_nocache, static_argnames="length", donate_argnums=1),
    )


def logits(model: JaxTransformer, tokens: np.ndarray) -> np.ndarray:
    """float32 logits: (B, T, vocab) for a decoder, (B, num_labels) for an encoder."""
    x = jax.device_put(jnp.asarray(np.asarray(tokens), dtype=jnp.int32), model.device)
    return np.asarray(model.fns["forward"](model.params, x), dtype=np.float32)


def generate_on_device(model: JaxTransformer, prompt: jax.Array, new_tokens: int, *, kv_cache: bool,
                       on_first: Callable[[jax.Array], None] | None = None) -> jax.Array:
    """Greedy tokens (B, new_tokens) int32 on the device, dispatched asynchronously; `on_first(token)` is called
    with token 1 as soon as it is dispatched (a caller that times the first token blocks on it there)."""
    if model.cfg.kind != "decoder":
        raise ValueError("only a decoder generates")
    b, p = prompt.shape
    total = p + new_tokens
    if total > model.cfg.max_positions:
        raise ValueError(f"{total} tokens exceed the context of {model.cfg.max_positions}")
    fns, params, out = model.fns, model.params, []
    if kv_cache:
        token, cache = fns["prefill"](params, prompt, total=total)
        out.append(token)
        if on_first:
            on_first(token)
        for j in range(1, new_tokens):
            token, cache = fns["decode"](params, cache, token, p + j - 1)
            out.append(token)
    else:
        buf = jnp.zeros((b, total), jnp.int32, device=model.device).at[:, :p].set(prompt)
        for j in range(new_tokens):
            cur = p + j
            length = min(-(-cur // NO_CACHE_BUCKET) * NO_CACHE_BUCKET, total)
            token, buf = fns["nocache"](params, buf, cur, length=length)
            out.append(token)
            if j == 0 and on_first:
                on_first(token)
    return jnp.stack(out, axis=1)


def generate(model: JaxTransformer, prompt: np.ndarray, new_tokens: int, *, kv_cache: bool) -> np.ndarray:
    """Greedy decoding: (B, new_tokens) int64 token ids."""
    x = jax.device_put(jnp.asarray(np.asarray(prompt), dtype=jnp.int32), model.device)
    return np.asarray(generate_on_device(model, x, new_tokens, kv_cache=kv_cache), dtype=np.int64)
