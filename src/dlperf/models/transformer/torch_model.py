"""The transformer of `config` as a PyTorch nn.Module, with greedy generation with and without a KV cache.

One module for both kinds. Decoder (GPT-2): pre-LN blocks, causal attention through
`torch.nn.functional.scaled_dot_product_attention` (is_causal for a whole sequence), a final layer norm and the
head tied to the token embedding (F.linear with `tok_emb.weight`, so the weight is one parameter). Encoder
(BERT): token + position + token-type embeddings, layer-normed; post-LN blocks, bidirectional attention; a tanh
pooler on the first token and a classifier. Parameters are float32 (mixed precision is the caller's autocast).

Weights load from and export to `config`'s canonical dict: a dense weight stored (in, out) is nn.Linear's
`weight.T`. Torch names follow the canonical ones (`blocks.3.attn_qkv` holds `h3.attn_qkv_w`/`_b`), so the
mapping is one rule (`_canonical_params`).

Generation: prefill runs the prompt (causal) and puts its keys and values in preallocated per-layer cache
tensors; each decode step runs one token, a query against the cache's first `pos + 1` keys, with no mask (a
1-token query may see every earlier key; `is_causal` would align its mask to the top-left and hide them).
Without a cache each step runs the whole sequence again. The head runs on the last position only (what
`cost.generate_flops` counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dlperf.models.transformer.config import TransformerConfig, check_weights, init_weights, weight_shapes


class KVCache:
    """Per-layer key and value tensors (batch, heads, length, head_dim), allocated on the first write with the
    dtype of the keys (bfloat16 under bf16 autocast) and reused by later generations of the same shape."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []

    def write(self, layer: int, pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, H, T, hd) at positions pos..pos+T-1 of `layer`; return the keys and values 0..pos+T-1."""
        if layer == len(self.k):
            b, h, _, hd = k.shape
            self.k.append(k.new_empty((b, h, self.length, hd)))
            self.v.append(v.new_empty((b, h, self.length, hd)))
        ck, cv = self.k[layer], self.v[layer]
        if ck.dtype != k.dtype or ck.shape[0] != k.shape[0]:
            raise ValueError(f"this cache holds {tuple(ck.shape)} {ck.dtype}, not {tuple(k.shape)} {k.dtype}")
        end = pos + k.shape[2]
        if end > self.length:
            raise ValueError(f"position {end} is past the cache's length {self.length}")
        ck[:, :, pos:end] = k
        cv[:, :, pos:end] = v
        return ck[:, :, :end], cv[:, :, :end]


class Block(nn.Module):
    """One transformer block; `pre_ln` picks GPT-2's order (LN before each sub-layer) or BERT's (after)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        d, eps = cfg.d_model, cfg.layer_norm_eps
        self.n_head, self.pre_ln = cfg.n_head, cfg.kind == "decoder"
        self.gelu = "tanh" if cfg.gelu == "tanh" else "none"
        self.ln1 = nn.LayerNorm(d, eps=eps)
        self.attn_qkv = nn.Linear(d, 3 * d)
        self.attn_out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=eps)
        self.mlp_fc = nn.Linear(d, cfg.ff)
        self.mlp_proj = nn.Linear(cfg.ff, d)

    def attention(self, x: torch.Tensor, layer: int, pos: int, cache: KVCache | None) -> torch.Tensor:
        b, t, d = x.shape
        # columns q | k | v, heads contiguous inside each: (B, T, 3, H, hd) -> three (B, H, T, hd)
        q, k, v = self.attn_qkv(x).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4).unbind(0)
        if cache is not None:
            k, v = cache.write(layer, pos, k, v)
        # causal over a square (the whole sequence: training, prefill); a single query after the prefill sees every
        # cached key unmasked. Decided by whether there is a cache (a Python fact), not by the length alone: an
        # exported graph's length is symbolic, and SDPA's is_causal must be a bool (a 1x1 causal mask hides nothing)
        causal = self.pre_ln and (cache is None or t > 1)
        if causal and cache is not None and k.shape[2] != t:
            raise ValueError("a multi-token step after the prefill is not supported (its mask is not square)")
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.attn_out(out.transpose(1, 2).reshape(b, t, d))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp_proj(F.gelu(self.mlp_fc(x), approximate=self.gelu))

    def forward(self, x: torch.Tensor, layer: int = 0, pos: int = 0, cache: KVCache | None = None) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attention(self.ln1(x), layer, pos, cache)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attention(x, layer, pos, cache))
        return self.ln2(x + self.mlp(x))


def _embedding(n: int, d: int) -> nn.Embedding:
    """An embedding table left uninitialised (`build` fills every weight). nn.Embedding's own init draws
    normal_, which on the meta device runs torch's Python reference and imports torch._dynamo: about 1 s of
    CPU in every worker that builds a transformer, for values that are overwritten."""
    return nn.Embedding.from_pretrained(torch.empty(n, d), freeze=False)


class Transformer(nn.Module):
    """The whole model. forward(tokens) -> logits: (B, T, vocab) for a decoder (or (B, vocab) with
    `last_only`), (B, num_labels) for an encoder. `pos` is the position of tokens[:, 0] (decode steps)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.tok_emb = _embedding(cfg.vocab_size, d)
        self.pos_emb = _embedding(cfg.max_positions, d)
        if cfg.kind == "encoder":
            self.type_emb = _embedding(cfg.type_vocab_size, d)
            self.emb_ln = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        if cfg.kind == "decoder":
            self.lnf = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        else:
            self.pooler = nn.Linear(d, d)
            self.cls = nn.Linear(d, cfg.num_labels)

    def forward(self, tokens: torch.Tensor, *, pos: int = 0, cache: KVCache | None = None,
                last_only: bool = False) -> torch.Tensor:
        t = tokens.shape[1]
        if pos + t > self.cfg.max_positions:
            raise ValueError(f"{pos + t} tokens exceed the context of {self.cfg.max_positions}")
        positions = torch.arange(pos, pos + t, device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        if self.cfg.kind == "encoder":
            x = self.emb_ln(x + self.type_emb(torch.zeros_like(tokens)))
        for i, block in enumerate(self.blocks):
            x = block(x, i, pos, cache)
        if self.cfg.kind == "encoder":
            return self.cls(torch.tanh(self.pooler(x[:, 0])))
        if last_only:
            x = x[:, -1]
        return F.linear(self.lnf(x), self.tok_emb.weight)  # the tied head


def _canonical_params(model: Transformer) -> dict[str, tuple[nn.Parameter, bool]]:
    """Canonical name -> (the torch parameter, whether it is stored transposed)."""
    out: dict[str, tuple[nn.Parameter, bool]] = {}
    for name, module in model.named_modules():
        key = name.replace("blocks.", "h", 1) if name.startswith("blocks.") else name
        if isinstance(module, nn.Embedding):
            out[key] = (module.weight, False)
        elif isinstance(module, nn.Linear):
            out[key + "_w"] = (module.weight, True)
            out[key + "_b"] = (module.bias, False)
        elif isinstance(module, nn.LayerNorm):
            out[key + "_g"] = (module.weight, False)
            out[key + "_b"] = (module.bias, False)
    return out


def build(cfg: TransformerConfig, weights: dict[str, np.ndarray] | None = None, *, device: str = "cpu") -> Transformer:
    """The model on `device` with `weights` (default `init_weights(cfg, 0)`), float32, in eval mode (no dropout
    anywhere, so eval and train compute the same). The module is made on the meta device and filled once, so
    no time goes into torch's own random init. `device="meta"` gives a model without storage (for counting)."""
    with torch.device("meta"):
        model = Transformer(cfg)
    if device == "meta":
        return model.eval()
    weights = init_weights(cfg, 0) if weights is None else weights
    check_weights(cfg, weights)
    model.to_empty(device=device)
    params = _canonical_params(model)
    assert set(params) == set(weight_shapes(cfg)), sorted(set(params) ^ set(weight_shapes(cfg)))
    with torch.no_grad():
        for name, (param, transposed) in params.items():
            w = torch.from_numpy(np.array(weights[name], dtype=np.float32))  # a copy: JAX exports read-only arrays
            param.copy_(w.T if transposed else w)
    return model.eval()


def to_weights(model: Transformer) -> dict[str, np.ndarray]:
    """The model's weights by canonical name and shape, float32 NumPy."""
    out = {}
    for name, (param, transposed) in _canonical_params(model).items():
        w = param.detach().to("cpu", torch.float32)
        out[name] = np.ascontiguousarray((w.T if transposed else w).numpy())
    return out


def _as_tokens(model: Transformer, tokens: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(tokens, dtype=np.int64), device=next(model.parameters()).device)


def logits(model: Transformer, tokens: np.ndarray) -> np.ndarray:
    """Float32 logits of `tokens` (B, T): the shapes of `reference.forward`."""
    with torch.inference_mode():
        return model(_as_tokens(model, tokens)).float().cpu().numpy()


def generate_tokens(model: Transformer, prompt: torch.Tensor, new_tokens: int, *, kv_cache: bool,
                    buffer: torch.Tensor | None = None, cache: KVCache | None = None,
                    on_first: Callable[[torch.Tensor], Any] | None = None) -> torch.Tensor:
    """Greedy generation on the device: (B, new_tokens) int64. Call under inference_mode (and autocast).
    `buffer` (B, prompt + new_tokens) int64 and `cache` may be given to reuse them across calls;
    `on_first(token)` runs when the prefill's token is chosen (a timer syncs the device there)."""
    b, p = prompt.shape
    total = p + new_tokens
    if total > model.cfg.max_positions:
        raise ValueError(f"prompt + new tokens = {total} exceed the context of {model.cfg.max_positions}")
    seq = prompt.new_empty((b, total)) if buffer is None else buffer
    seq[:, :p] = prompt
    if kv_cache and cache is None:
        cache = KVCache(total)
    cache = cache if kv_cache else None
    nxt = model(seq[:, :p], cache=cache, last_only=True).argmax(-1)  # ties: the first (lowest) id
    seq[:, p] = nxt
    if on_first is not None:
        on_first(nxt)
    for j in range(1, new_tokens):
        end = p + j  # tokens known so far
        if cache is not None:
            nxt = model(seq[:, end - 1:end], pos=end - 1, cache=cache, last_only=True).argmax(-1)
        else:
            nxt = model(seq[:, :end], last_only=True).argmax(-1)
        seq[:, end] = nxt
    return seq[:, p:]


def generate(model: Transformer, prompt: np.ndarray, new_tokens: int, *, kv_cache: bool) -> np.ndarray:
    """Greedy generation: (B, new_tokens) int64 NumPy (the agreed API; float32 weights)."""
    if model.cfg.kind != "decoder":
        raise ValueError("only a decoder generates")
    with torch.inference_mode():
        out = generate_tokens(model, _as_tokens(model, prompt), new_tokens, kv_cache=kv_cache)
    return out.cpu().numpy().astype(np.int64)


def param_count(model: nn.Module) -> int:
    """The module's own parameter count (a tied weight is one parameter, counted once)."""
    return sum(p.numel() for p in model.parameters())


__all__ = ["Block", "KVCache", "Transformer", "build", "generate", "generate_tokens", "logits", "param_count",
           "to_weights"]
