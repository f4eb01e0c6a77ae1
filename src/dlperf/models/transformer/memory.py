"""Memory of a transformer's training step, forward pass and generation, ESTIMATED from its config alone.

Like `dlperf.models.memory` (the CNNs'), this is an estimate, not a measurement: it counts the tensors the
computation must hold, by name, and knows nothing of allocator caching, workspaces, fragmentation or the
framework's own footprint (on a CPU that footprint is measured by the worker, `baseline_rss_bytes`, and added by
whoever compares, never guessed here).

Training step (`train_memory`), batch B, sequence T, width d, heads h, feed-forward f, vocabulary V, L blocks,
n = B T tokens; `A` is the bytes of a low-precision activation (4 in fp32, 2 under bf16/fp16 autocast):
- parameters, their gradients and AdamW's two states (exp_avg, exp_avg_sq): 4 bytes each per parameter, fp32
  master weights in every precision (mixed precision keeps them so);
- under autocast, the low-precision copies of the weights that the matrix products read (and save for their
  backward): A bytes per weight used in a product (`cost.matmul_params`, and an encoder's pooler and classifier;
  biases are added, not saved);
- the input tokens: int64, B (T + 1) for a decoder (inputs and targets are views of one array), B T for an
  encoder (plus its B labels);
- activations kept for backward, per block (named in `TrainMemory.activations`):
  `ln_inputs` the two layer norms' inputs, n d x 4 each (the residual stream stays fp32 under autocast: an fp32
  sum plus a low-precision branch is fp32); `ln_stats` their mean and 1/std, 4 x n x 4 bytes; `matmul_inputs`
  the inputs of the qkv and MLP products (the layer norms' outputs in a decoder, the block input and the first
  norm's output in an encoder), 2 n d A; `qkv` the projection's output, 3 n d A (the attention saves q, k, v);
  `attention_saved`: a fused kernel (flash, memory-efficient; `attention="fused"`) keeps the log-sum-exp per head
  and row, B h T x 4, while the math path (`attention="math"`: softmax(q k^T) v as separate products) keeps the
  whole T x T probabilities per head, B h T T A, and a decoder's causal mask, T T bytes (bool); `attention_out` the
  attention's output, n d A (the input of the output projection); `mlp_pre` the first MLP product's output (the
  GELU's input), n f A; `gelu_out` the GELU's output (the second product's input), n f A;
- outside the blocks: a decoder's final layer norm (its input n d x 4, statistics, output n d A); an encoder's
  embedding layer norm (input, statistics) and the pooler's input (in fp32 the first-token slice is a view
  that keeps the last block's whole output, n d x 4; under autocast its cast copy, B d A), the pooler's output
  B d A;
- the loss: the log-softmax's output in fp32 (decoder n V x 4, encoder B labels x 4) and, for a decoder, the
  int64 copy of the targets it keeps (a slice of the token array made contiguous) (`loss_bytes`);
- the logits the step holds until its backward: n V A (decoder), and under autocast their fp32 copy for the loss
  (n V x 4) (`logits_bytes`);
- the backward's activation gradients: on a device (`where="device"`) only the largest transient, at the loss
  (the gradient of the log-softmax's output and of its input, 2 n V x 4, plus n V A under autocast); in a CPU
  process (`where="host"`) the C allocator keeps freed blocks, so about one gradient per saved activation
  (as the CNN model counts it).
Every part is counted alive at once (the start of the backward; the parameter gradients in fact grow while
activations are freed, and AdamW's temporaries come after both), so the total errs high by up to the gradients.
`saved_bytes` is what autograd itself keeps (activations, the loss's saved tensors, autocast's weight copies): the
part `tests/models/test_transformer_memory.py` counts in PyTorch with `saved_tensors_hooks`.

Inference and generation (`infer_memory`, `generate_memory`): the weights (and autocast's copies), the tokens,
one block's working set at a time (the residual x4, qkv, the attention's output or its T x T scores, the MLP's
two n f tensors), the logits (every position for `infer`, the last position for generation), and for generation
the KV cache (`kv_cache_bytes`): 2 L B S d A for S cached positions. Greedy generation of N tokens after a P-token
prompt caches P + N - 1 positions at the end (the last token is never fed back); without a cache, each step runs
the whole sequence again (the working set at P + N - 1 tokens), and nothing is cached.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from dlperf.models.transformer.config import TransformerConfig, param_count
from dlperf.models.transformer.cost import matmul_params

Attention = Literal["fused", "math"]
#: Bytes of a low-precision activation per precision (autocast's dtype; fp32 keeps everything in 4 bytes).
ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
FP32 = 4
INT64 = 8
#: AdamW keeps two fp32 states per parameter (first and second moments).
ADAMW_SLOTS = 2


def _act_bytes(precision: str) -> int:
    if precision not in ACTIVATION_BYTES:
        raise ValueError(f"precision must be one of {sorted(ACTIVATION_BYTES)}, not {precision!r}")
    return ACTIVATION_BYTES[precision]


def _check(batch: int, seq_len: int, attention: str, cfg: TransformerConfig) -> None:
    if batch < 1 or seq_len < 1:
        raise ValueError(f"batch and seq_len must be at least 1, not {batch} and {seq_len}")
    if seq_len > cfg.max_positions:
        raise ValueError(f"seq_len {seq_len} exceeds the context of {cfg.max_positions}")
    if attention not in ("fused", "math"):
        raise ValueError(f"attention must be 'fused' or 'math', not {attention!r}")


def weight_copies_bytes(cfg: TransformerConfig, precision: str) -> int:
    """Autocast's low-precision copies of the weights its matrix products read (0 in fp32): the blocks' and a
    decoder's tied head (`cost.matmul_params`), an encoder's pooler and classifier."""
    if precision == "fp32":
        return 0
    head = cfg.d_model * (cfg.d_model + cfg.num_labels) if cfg.kind == "encoder" else 0
    return (matmul_params(cfg) + head) * _act_bytes(precision)


def block_activations(cfg: TransformerConfig, batch: int, seq_len: int, *, precision: str = "fp32",
                      attention: Attention = "fused") -> dict[str, int]:
    """The bytes one block keeps for its backward, by name (see the module doc)."""
    a = _act_bytes(precision)
    n, d, f, h, t = batch * seq_len, cfg.d_model, cfg.ff, cfg.n_head, seq_len
    mask = t * t if cfg.kind == "decoder" else 0  # the causal mask (bool); an encoder attends everywhere
    attn = batch * h * t * FP32 if attention == "fused" else batch * h * t * t * a + mask
    return {"ln_inputs": 2 * n * d * FP32, "ln_stats": 4 * n * FP32, "matmul_inputs": 2 * n * d * a,
            "qkv": 3 * n * d * a, "attention_saved": attn, "attention_out": n * d * a, "mlp_pre": n * f * a,
            "gelu_out": n * f * a}


@dataclass(frozen=True)
class TrainMemory:
    """Bytes of one training step by part; `activations` by name, summed over the blocks and the parts outside
    them. An ESTIMATE (see the module doc); `total_bytes` sums every part."""

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    weight_copies_bytes: int
    input_bytes: int
    activations: dict[str, int] = field(default_factory=dict)
    loss_bytes: int = 0
    logits_bytes: int = 0
    activation_grads_bytes: int = 0
    where: str = "device"

    @property
    def activations_bytes(self) -> int:
        return sum(self.activations.values())

    @property
    def saved_bytes(self) -> int:
        """What autograd keeps for the backward: activations, the loss's saved tensors, autocast's weight copies."""
        return self.activations_bytes + self.loss_bytes + self.weight_copies_bytes

    @property
    def total_bytes(self) -> int:
        return (self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.input_bytes + self.saved_bytes
                + self.logits_bytes + self.activation_grads_bytes)

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"activations_bytes": self.activations_bytes, "saved_bytes": self.saved_bytes,
                               "total_bytes": self.total_bytes}


def train_memory(cfg: TransformerConfig, batch: int, seq_len: int, *, precision: str = "fp32",
                 attention: Attention = "fused", where: str = "device") -> TrainMemory:
    """The estimate of one AdamW training step on `batch` sequences of `seq_len` tokens; `where` is "device" (an
    accelerator allocator's peak) or "host" (a CPU process's peak RSS, without the framework's own footprint)."""
    if where not in ("device", "host"):
        raise ValueError(f"where must be 'device' or 'host', not {where!r}")
    _check(batch, seq_len, attention, cfg)
    a = _act_bytes(precision)
    n, d, v, L = batch * seq_len, cfg.d_model, cfg.vocab_size, cfg.n_layer
    acts = {k: L * x for k, x in block_activations(cfg, batch, seq_len, precision=precision,
                                                   attention=attention).items()}
    n_params = param_count(cfg)
    if cfg.kind == "decoder":
        acts["final_ln"] = n * d * FP32 + 2 * n * FP32 + n * d * a
        classes, tokens = v, batch * (seq_len + 1)
        loss = n * v * FP32 + n * INT64  # log-softmax output, the targets' contiguous copy
        logits = n * v * a + (n * v * FP32 if a != FP32 else 0)
        grads = 2 * n * v * FP32 + (n * v * a if a != FP32 else 0)
    else:
        pooler_in = n * d * FP32 if a == FP32 else batch * d * a
        acts["embedding_ln"] = n * d * FP32 + 2 * n * FP32
        acts["pooler"] = pooler_in + batch * d * a
        classes, tokens = cfg.num_labels, batch * seq_len + batch  # tokens and labels
        loss = batch * classes * FP32  # the log-softmax's output (the labels it keeps are the input's own)
        logits = batch * classes * a + (batch * classes * FP32 if a != FP32 else 0)
        grads = 2 * batch * classes * FP32
    if where == "host":
        grads = sum(acts.values()) + loss + logits
    return TrainMemory(
        params_bytes=n_params * FP32, grads_bytes=n_params * FP32, optimizer_bytes=ADAMW_SLOTS * n_params * FP32,
        weight_copies_bytes=weight_copies_bytes(cfg, precision), input_bytes=tokens * INT64, activations=acts,
        loss_bytes=loss, logits_bytes=logits, activation_grads_bytes=grads, where=where)


def kv_cache_bytes(cfg: TransformerConfig, batch: int, positions: int, *, precision: str = "fp32") -> int:
    """Exact bytes of a KV cache of `positions` tokens: keys and values of every block, 2 L B S d, at the
    activation dtype's width (autocast's keys and values come out of a low-precision product)."""
    if cfg.kind != "decoder":
        raise ValueError("only a decoder keeps a KV cache")
    return 2 * cfg.n_layer * batch * positions * cfg.d_model * _act_bytes(precision)


@dataclass(frozen=True)
class InferMemory:
    """Bytes of a forward pass or a generation call by part (an ESTIMATE; see the module doc)."""

    params_bytes: int
    weight_copies_bytes: int
    input_bytes: int
    working_set_bytes: int  # one block's tensors at a time
    logits_bytes: int
    kv_cache_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return (self.params_bytes + self.weight_copies_bytes + self.input_bytes + self.working_set_bytes
                + self.logits_bytes + self.kv_cache_bytes)

    def to_dict(self) -> dict[str, int]:
        return asdict(self) | {"total_bytes": self.total_bytes}


def _working_set(cfg: TransformerConfig, batch: int, queries: int, keys: int, a: int, attention: str) -> int:
    """One block's tensors alive together without autograd: the residual (fp32) and a norm's output, qkv, the
    attention's output (and, on the math path, its scores), the MLP's two n f tensors."""
    n, d = batch * queries, cfg.d_model
    scores = batch * cfg.n_head * queries * keys * a if attention == "math" else 0
    return n * d * FP32 + n * d * a + 3 * n * d * a + n * d * a + scores + 2 * n * cfg.ff * a


def infer_memory(cfg: TransformerConfig, batch: int, seq_len: int, *, precision: str = "fp32",
                 attention: Attention = "fused") -> InferMemory:
    """One forward pass (no gradients) on `batch` sequences of `seq_len` tokens: logits at every position."""
    _check(batch, seq_len, attention, cfg)
    a = _act_bytes(precision)
    outputs = batch * seq_len * cfg.vocab_size if cfg.kind == "decoder" else batch * cfg.num_labels
    return InferMemory(param_count(cfg) * FP32, weight_copies_bytes(cfg, precision), batch * seq_len * INT64,
                       _working_set(cfg, batch, seq_len, seq_len, a, attention), outputs * a)


def generate_memory(cfg: TransformerConfig, batch: int, prompt_len: int, new_tokens: int, *, kv_cache: bool = True,
                    precision: str = "fp32", attention: Attention = "fused") -> InferMemory:
    """Greedy generation of `new_tokens` after `prompt_len`: the prefill's working set (with a cache) or the last
    step's (without), the last position's logits, and the cache of prompt_len + new_tokens positions (what the
    torch, Keras and JAX builders allocate; the last token is never fed back, so NumPy's holds one fewer)."""
    if cfg.kind != "decoder":
        raise ValueError("only a decoder generates")
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be at least 1, not {new_tokens}")
    positions = prompt_len + new_tokens
    _check(batch, positions, attention, cfg)
    a = _act_bytes(precision)
    queries = prompt_len if kv_cache else positions
    return InferMemory(param_count(cfg) * FP32, weight_copies_bytes(cfg, precision),
                       batch * (prompt_len + new_tokens) * INT64,
                       _working_set(cfg, batch, queries, queries, a, attention), batch * cfg.vocab_size * a,
                       kv_cache_bytes(cfg, batch, positions, precision=precision) if kv_cache else 0)
