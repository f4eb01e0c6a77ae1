"""FLOPs of a transformer, from its config alone, by one written-down convention.

Convention (the one `torch.utils.flop_counter.FlopCounterMode` uses, so the two can be compared):
- only matrix products count, 2 FLOPs per multiply-add: a dense layer x @ W on n tokens is 2 n d_in d_out; its
  bias, layer norms, GELU, softmax, the residual adds, the attention scale and the embedding lookups count 0;
- attention counts the whole square: for T queries against S keys, q k^T is 2 T S d and the weighted sum of
  values 2 T S d, per layer (4 T S d), with no discount for the causal mask (kernels that skip the masked half
  do less work than this counts);
- a backward pass costs twice its forward (gradients of the inputs and of the weights of every product), so a
  training step is 3x the forward. Per token that is PaLM's model-FLOPs count: 6 N + 12 L d T, where N is the
  parameters in matrix products (the tied head counted once, embeddings looked up count 0); MFU divides these
  model FLOPs per second by the device's peak for the dtype used (recomputation, if any, is not counted);
- generation computes the head only for the last position of the prompt (prefill) and for each new token.
  With a KV cache, prefill runs the P prompt tokens and each later token one token against P + j keys; without
  one, each new token runs the whole sequence again.
"""

from __future__ import annotations

from dlperf.models.transformer.config import TransformerConfig


def block_matmul_params(cfg: TransformerConfig) -> int:
    """Weights in the matrix products of one block: qkv (d x 3d), output (d x d), MLP (d x ff, ff x d)."""
    d = cfg.d_model
    return 4 * d * d + 2 * d * cfg.ff


def matmul_params(cfg: TransformerConfig) -> int:
    """N of the 6N rule: every weight used in a matrix product once per token (decoder: the tied head too)."""
    body = cfg.n_layer * block_matmul_params(cfg)
    return body + cfg.vocab_size * cfg.d_model if cfg.kind == "decoder" else body


def _body_flops(cfg: TransformerConfig, tokens: int, keys_times_queries: int) -> float:
    """The blocks' products for `tokens` tokens whose attention spans `keys_times_queries` query-key pairs."""
    return 2.0 * tokens * cfg.n_layer * block_matmul_params(cfg) + 4.0 * cfg.n_layer * keys_times_queries * cfg.d_model


def _head_flops(cfg: TransformerConfig, positions: int, batch: int) -> float:
    """Decoder: the tied LM head on `positions` per sequence; encoder: the pooler and classifier on the first."""
    if cfg.kind == "decoder":
        return 2.0 * batch * positions * cfg.d_model * cfg.vocab_size
    d = cfg.d_model
    return 2.0 * batch * (d * d + d * cfg.num_labels)


def forward_flops(cfg: TransformerConfig, batch: int, seq_len: int) -> float:
    """One forward pass of `batch` sequences of `seq_len` tokens (decoder: logits at every position)."""
    return batch * _body_flops(cfg, seq_len, seq_len * seq_len) + _head_flops(cfg, seq_len, batch)


def train_flops(cfg: TransformerConfig, batch: int, seq_len: int) -> float:
    """One training step: forward, backward (2x forward); the optimizer's element-wise update counts 0."""
    return 3.0 * forward_flops(cfg, batch, seq_len)


def train_flops_per_token(cfg: TransformerConfig, seq_len: int) -> float:
    """6 N + 12 L d T for a decoder (the closed form of `train_flops` / tokens, written out for the docs)."""
    return train_flops(cfg, 1, seq_len) / seq_len


def prefill_flops(cfg: TransformerConfig, batch: int, prompt_len: int) -> float:
    """The prompt through the model, the head on its last position (time to first token)."""
    return batch * _body_flops(cfg, prompt_len, prompt_len * prompt_len) + _head_flops(cfg, 1, batch)


def decode_flops(cfg: TransformerConfig, batch: int, context: int, kv_cache: bool) -> float:
    """One new token for each sequence whose context (prompt and tokens so far, the new one included) is
    `context` long: one token against `context` keys with a cache, the whole context again without."""
    if kv_cache:
        return batch * _body_flops(cfg, 1, context) + _head_flops(cfg, 1, batch)
    return prefill_flops(cfg, batch, context)


def generate_flops(cfg: TransformerConfig, batch: int, prompt_len: int, new_tokens: int, kv_cache: bool) -> float:
    """A whole greedy generation: prefill gives the first new token, then `new_tokens - 1` decode steps."""
    total = prefill_flops(cfg, batch, prompt_len)
    for j in range(1, new_tokens):
        total += decode_flops(cfg, batch, prompt_len + j, kv_cache)
    return total
