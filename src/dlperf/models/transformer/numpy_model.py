"""The transformer in float32 NumPy, with a real KV cache: the NumPy builder's model (`numpy_transformer`).

The same API as every framework's model module (`build`, `to_weights`, `logits`, `generate`) and the same math
as `reference` (its layer norm, tanh GELU and softmax are reused; they keep float32 inputs float32), but in
float32 and written for speed where it matters:
- generation computes the LM head on the last position only (the FLOPs convention of `cost`), and
- with `kv_cache=True` the keys and values are kept per layer in arrays (B, heads, prompt + new - 1, head_dim)
  made by `new_cache`: the NumPy builder makes them once per case (outside the timed calls) and passes them to
  every call, which overwrites them from position 0 and reads only what it wrote; each decode step runs one
  token against them. `generate` without a `cache` makes its own.
  Without the cache each new token runs the whole sequence again, as `reference.generate` does.
The erf GELU (BERT) is SciPy's `special.erf` (a core dependency), exact in float32 and vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dlperf.models.transformer.config import TransformerConfig, check_weights, init_weights
from dlperf.models.transformer.reference import gelu as _gelu_tanh
from dlperf.models.transformer.reference import layer_norm, softmax

F32 = np.float32
#: Per layer: (keys, values), each (batch, heads, positions, head_dim).
Cache = list[tuple[np.ndarray, np.ndarray]]


@dataclass
class NumpyTransformer:
    cfg: TransformerConfig
    w: dict[str, np.ndarray]


def build(cfg: TransformerConfig, weights: dict[str, np.ndarray] | None = None, *,
          device: str = "cpu") -> NumpyTransformer:
    """The model on the CPU with float32 copies of `weights` (default `init_weights(cfg, 0)`)."""
    if device != "cpu":
        raise ValueError(f"NumPy computes on the CPU only, not {device}")
    weights = init_weights(cfg, 0) if weights is None else weights
    check_weights(cfg, weights)
    return NumpyTransformer(cfg, {k: np.ascontiguousarray(v, dtype=F32) for k, v in weights.items()})


def to_weights(model: NumpyTransformer) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in model.w.items()}


def _gelu(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "tanh":
        return _gelu_tanh(x, "tanh")
    from scipy.special import erf

    return F32(0.5) * x * (F32(1.0) + erf(x * F32(1 / math.sqrt(2.0))))


def _attention(m: NumpyTransformer, x: np.ndarray, p: str, causal: bool, start: int,
               cache: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Self-attention of x (B, T, d) at positions start..start+T-1; with `cache`, its keys and values are
    written there and the queries attend to every cached position up to their own."""
    cfg, w = m.cfg, m.w
    b, t, d = x.shape
    h, hd = cfg.n_head, cfg.head_dim
    qkv = x @ w[p + "attn_qkv_w"] + w[p + "attn_qkv_b"]
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, t, h, hd).transpose(0, 2, 1, 3) for i in range(3))
    if cache is not None:
        keys, values = cache
        keys[:, :, start:start + t] = k
        values[:, :, start:start + t] = v
        k, v = keys[:, :, :start + t], values[:, :, :start + t]
    scores = (q @ k.transpose(0, 1, 3, 2)) * F32(1 / math.sqrt(hd))  # (B, H, T, S)
    if causal and t > 1:
        s = k.shape[2]
        allowed = np.arange(s)[None, :] <= (np.arange(t) + (s - t))[:, None]
        scores = np.where(allowed, scores, F32(-np.inf))
    out = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return out @ w[p + "attn_out_w"] + w[p + "attn_out_b"]


def _mlp(m: NumpyTransformer, x: np.ndarray, p: str) -> np.ndarray:
    w = m.w
    return _gelu(x @ w[p + "mlp_fc_w"] + w[p + "mlp_fc_b"], m.cfg.gelu) @ w[p + "mlp_proj_w"] + w[p + "mlp_proj_b"]


def _decoder(m: NumpyTransformer, tokens: np.ndarray, start: int = 0, cache: Cache | None = None,
             last_only: bool = False) -> np.ndarray:
    """Logits of a decoder for `tokens` at positions start..: (B, T, V), or (B, V) of the last position."""
    cfg, w = m.cfg, m.w
    t = tokens.shape[1]
    if start + t > cfg.max_positions:
        raise ValueError(f"{start + t} tokens exceed the context of {cfg.max_positions}")
    x = w["tok_emb"][tokens] + w["pos_emb"][start:start + t]
    eps = cfg.layer_norm_eps
    for i in range(cfg.n_layer):
        p = f"h{i}."
        x = x + _attention(m, layer_norm(x, w[p + "ln1_g"], w[p + "ln1_b"], eps), p, True, start,
                           cache[i] if cache is not None else None)
        x = x + _mlp(m, layer_norm(x, w[p + "ln2_g"], w[p + "ln2_b"], eps), p)
    if last_only:
        x = x[:, -1]
    return layer_norm(x, w["lnf_g"], w["lnf_b"], eps) @ w["tok_emb"].T


def _encoder(m: NumpyTransformer, tokens: np.ndarray) -> np.ndarray:
    cfg, w = m.cfg, m.w
    t = tokens.shape[1]
    eps = cfg.layer_norm_eps
    x = w["tok_emb"][tokens] + w["pos_emb"][:t] + w["type_emb"][0]
    x = layer_norm(x, w["emb_ln_g"], w["emb_ln_b"], eps)
    for i in range(cfg.n_layer):
        p = f"h{i}."
        x = layer_norm(x + _attention(m, x, p, False, 0, None), w[p + "ln1_g"], w[p + "ln1_b"], eps)
        x = layer_norm(x + _mlp(m, x, p), w[p + "ln2_g"], w[p + "ln2_b"], eps)
    pooled = np.tanh(x[:, 0] @ w["pooler_w"] + w["pooler_b"])
    return pooled @ w["cls_w"] + w["cls_b"]


def logits(model: NumpyTransformer, tokens: np.ndarray) -> np.ndarray:
    """float32 logits, shaped as `reference.forward`'s: (B, T, V) for a decoder, (B, num_labels) for an encoder."""
    tokens = np.asarray(tokens)
    return _decoder(model, tokens) if model.cfg.kind == "decoder" else _encoder(model, tokens)


def new_cache(cfg: TransformerConfig, batch: int, prompt_len: int, new_tokens: int) -> Cache:
    """Uninitialised per-layer keys and values for a generation of `new_tokens` after `prompt_len` tokens (the
    last new token is never fed back, so prompt_len + new_tokens - 1 positions)."""
    shape = (batch, cfg.n_head, prompt_len + new_tokens - 1, cfg.head_dim)
    return [(np.empty(shape, F32), np.empty(shape, F32)) for _ in range(cfg.n_layer)]


def generate(model: NumpyTransformer, prompt: np.ndarray, new_tokens: int, *, kv_cache: bool,
             on_first_token: Callable[[], None] | None = None, cache: Cache | None = None) -> np.ndarray:
    """Greedy decoding (argmax, ties to the lowest id): (B, new_tokens) int64. `on_first_token` is called as
    soon as the first new token is known (a generate step reads its clock there: time to first token).
    With `kv_cache`, `cache` (from `new_cache` for this batch, prompt and new_tokens) is reused if given."""
    cfg = model.cfg
    if cfg.kind != "decoder":
        raise ValueError("only a decoder generates")
    prompt = np.asarray(prompt)
    b, plen = prompt.shape
    if plen + new_tokens > cfg.max_positions:
        raise ValueError(f"prompt + new tokens = {plen + new_tokens} exceed the context of {cfg.max_positions}")
    out = np.empty((b, new_tokens), dtype=np.int64)
    if not kv_cache:
        cache = None
    elif cache is None:
        cache = new_cache(cfg, b, plen, new_tokens)
    elif cache[0][0].shape != (b, cfg.n_head, plen + new_tokens - 1, cfg.head_dim):
        raise ValueError(f"the cache holds {cache[0][0].shape}, not this generation's {b} x {plen + new_tokens - 1}")
    seq = prompt
    nxt = _decoder(model, prompt, 0, cache, last_only=True).argmax(-1)
    out[:, 0] = nxt
    if on_first_token is not None:
        on_first_token()
    for j in range(1, new_tokens):
        if cache is not None:
            nxt = _decoder(model, nxt[:, None], plen + j - 1, cache, last_only=True).argmax(-1)
        else:
            seq = np.concatenate([seq, nxt[:, None]], axis=1)
            nxt = _decoder(model, seq, 0, None, last_only=True).argmax(-1)
        out[:, j] = nxt
    return out
