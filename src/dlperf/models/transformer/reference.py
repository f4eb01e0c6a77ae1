"""The transformer in float64 NumPy: the reference every framework's logits are checked against.

Written for clarity, not speed (tests use tiny configurations). It follows `config`'s definitions exactly:
the same canonical weights, pre-LN causal decoder or post-LN bidirectional encoder, GELU by `cfg.gelu`.
"""

from __future__ import annotations

import math

import numpy as np

from dlperf.models.transformer.config import TransformerConfig, check_weights


def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(x: np.ndarray, w: dict[str, np.ndarray], p: str, cfg: TransformerConfig, causal: bool) -> np.ndarray:
    """Multi-head self-attention of x (B, T, d): qkv projection, softmax(q k^T / sqrt(hd)) v, output projection."""
    b, t, d = x.shape
    h, hd = cfg.n_head, cfg.head_dim
    qkv = x @ w[p + "attn_qkv_w"] + w[p + "attn_qkv_b"]
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, t, h, hd).transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if causal:
        scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    out = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return out @ w[p + "attn_out_w"] + w[p + "attn_out_b"]


def mlp(x: np.ndarray, w: dict[str, np.ndarray], p: str, cfg: TransformerConfig) -> np.ndarray:
    return gelu(x @ w[p + "mlp_fc_w"] + w[p + "mlp_fc_b"], cfg.gelu) @ w[p + "mlp_proj_w"] + w[p + "mlp_proj_b"]


def forward(cfg: TransformerConfig, weights: dict[str, np.ndarray], tokens: np.ndarray,
            token_types: np.ndarray | None = None) -> np.ndarray:
    """Logits: (B, T, vocab) for a decoder, (B, num_labels) for an encoder. `tokens` (B, T) int."""
    check_weights(cfg, weights)
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    tokens = np.asarray(tokens)
    t = tokens.shape[1]
    if t > cfg.max_positions:
        raise ValueError(f"{t} tokens exceed the context of {cfg.max_positions}")
    x = w["tok_emb"][tokens] + w["pos_emb"][:t]
    eps = cfg.layer_norm_eps
    if cfg.kind == "decoder":
        for i in range(cfg.n_layer):
            p = f"h{i}."
            x = x + attention(layer_norm(x, w[p + "ln1_g"], w[p + "ln1_b"], eps), w, p, cfg, causal=True)
            x = x + mlp(layer_norm(x, w[p + "ln2_g"], w[p + "ln2_b"], eps), w, p, cfg)
        return layer_norm(x, w["lnf_g"], w["lnf_b"], eps) @ w["tok_emb"].T
    types = np.zeros_like(tokens) if token_types is None else np.asarray(token_types)
    x = layer_norm(x + w["type_emb"][types], w["emb_ln_g"], w["emb_ln_b"], eps)
    for i in range(cfg.n_layer):
        p = f"h{i}."
        x = layer_norm(x + attention(x, w, p, cfg, causal=False), w[p + "ln1_g"], w[p + "ln1_b"], eps)
        x = layer_norm(x + mlp(x, w, p, cfg), w[p + "ln2_g"], w[p + "ln2_b"], eps)
    pooled = np.tanh(x[:, 0] @ w["pooler_w"] + w["pooler_b"])
    return pooled @ w["cls_w"] + w["cls_b"]


def generate(cfg: TransformerConfig, weights: dict[str, np.ndarray], prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy decoding without a cache (the whole sequence again for each token): (B, new_tokens) token ids.
    Ties in the argmax go to the lowest id, as in every framework's argmax."""
    if cfg.kind != "decoder":
        raise ValueError("only a decoder generates")
    seq = np.asarray(prompt)
    out = []
    for _ in range(new_tokens):
        nxt = forward(cfg, weights, seq)[:, -1].argmax(-1)
        out.append(nxt)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    return np.stack(out, axis=1)
