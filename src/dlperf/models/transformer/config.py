"""A transformer defined once: its shape (`TransformerConfig`), named presets, and its weights as plain arrays.

Two kinds, as published:
- `decoder`: GPT-2's shape. Learned positions, pre-layer-norm blocks, causal self-attention, GELU (tanh
  approximation, GPT-2's "gelu_new"), a final layer norm, and the language-model head tied to the token
  embedding (logits = h @ tok_emb.T). GPT-2 small has 124,439,808 parameters.
- `encoder`: BERT's shape, for classification. Token, position and token-type embeddings summed and
  layer-normed, post-layer-norm blocks, bidirectional attention, GELU (erf), a pooler (tanh of a dense layer on
  the first token) and a classifier. BERT-base without the classifier has 109,482,240 parameters.
No dropout anywhere: dlperf times the computation, and dropout would make frameworks disagree.

Weights are framework-neutral: `weight_shapes(cfg)` names every array, and a dense layer's weight is stored
(in, out) so that y = x @ W + b (torch's nn.Linear keeps W.T). Each framework's model loads and exports this
dict (`dlperf.models.transformer.<family>_model`), which is how tests copy one framework's weights into another.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Standard deviation of the random weights (GPT-2's and BERT's initialiser); layer-norm gains are 1 + this noise.
INIT_STD = 0.02


class TransformerConfig(BaseModel):
    """The shape of a transformer; every size is a parameter, so tiny configurations run in tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["decoder", "encoder"]
    vocab_size: int = Field(gt=0)
    n_layer: int = Field(gt=0)
    d_model: int = Field(gt=0, description="width (hidden size)")
    n_head: int = Field(gt=0)
    d_ff: int | None = Field(default=None, gt=0, description="feed-forward width (default 4 x d_model)")
    max_positions: int = Field(gt=0, description="context: learned position embeddings")
    layer_norm_eps: float = Field(default=1e-5, gt=0)
    gelu: Literal["tanh", "erf"] = "tanh"
    type_vocab_size: int = Field(default=2, gt=0, description="encoder only: token types (BERT's segments)")
    num_labels: int = Field(default=2, gt=1, description="encoder only: classifier outputs")

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerConfig:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_head {self.n_head}")
        return self

    @property
    def ff(self) -> int:
        return self.d_ff or 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


def _decoder(n_layer: int, d_model: int, n_head: int, *, vocab: int = 50257, ctx: int = 1024) -> TransformerConfig:
    return TransformerConfig(kind="decoder", vocab_size=vocab, n_layer=n_layer, d_model=d_model, n_head=n_head,
                             max_positions=ctx, layer_norm_eps=1e-5, gelu="tanh")


def _encoder(n_layer: int, d_model: int, n_head: int, *, vocab: int = 30522, ctx: int = 512) -> TransformerConfig:
    return TransformerConfig(kind="encoder", vocab_size=vocab, n_layer=n_layer, d_model=d_model, n_head=n_head,
                             max_positions=ctx, layer_norm_eps=1e-12, gelu="erf")


#: Named shapes. gpt2-* and bert-base/large are the published ones; bert-tiny/mini are Google's small BERTs
#: (Turc et al. 2019); gpt2-tiny and gpt2-mini are dlperf's own small decoders for tests and --quick.
PRESETS: dict[str, TransformerConfig] = {
    "gpt2-small": _decoder(12, 768, 12),
    "gpt2-medium": _decoder(24, 1024, 16),
    "gpt2-large": _decoder(36, 1280, 20),
    "gpt2-xl": _decoder(48, 1600, 25),
    "gpt2-mini": _decoder(4, 256, 4, vocab=8192, ctx=512),
    "gpt2-tiny": _decoder(2, 64, 4, vocab=512, ctx=128),
    "bert-base": _encoder(12, 768, 12),
    "bert-large": _encoder(24, 1024, 16),
    "bert-mini": _encoder(4, 256, 4),
    "bert-tiny": _encoder(2, 128, 2),
}


def get_config(name: str, **overrides: int | float | str) -> TransformerConfig:
    """A preset, with any field replaced (None values are ignored); KeyError names the presets."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown transformer {name!r} (known: {', '.join(PRESETS)})") from None
    changes = {k: v for k, v in overrides.items() if v is not None}
    return TransformerConfig.model_validate(base.model_dump() | changes) if changes else base


def layer_shapes(cfg: TransformerConfig, i: int) -> dict[str, tuple[int, ...]]:
    """The arrays of block `i`, in order (the same names for both kinds)."""
    d, f = cfg.d_model, cfg.ff
    p = f"h{i}."
    return {
        p + "ln1_g": (d,), p + "ln1_b": (d,),
        p + "attn_qkv_w": (d, 3 * d), p + "attn_qkv_b": (3 * d,),  # columns: q, then k, then v; heads inside each
        p + "attn_out_w": (d, d), p + "attn_out_b": (d,),
        p + "ln2_g": (d,), p + "ln2_b": (d,),
        p + "mlp_fc_w": (d, f), p + "mlp_fc_b": (f,),
        p + "mlp_proj_w": (f, d), p + "mlp_proj_b": (d,),
    }


def weight_shapes(cfg: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Every array of the model, by canonical name. In a decoder, ln1 comes before attention and ln2 before the
    MLP (pre-LN); in an encoder ln1 follows attention and ln2 the MLP (post-LN)."""
    d = cfg.d_model
    out: dict[str, tuple[int, ...]] = {"tok_emb": (cfg.vocab_size, d), "pos_emb": (cfg.max_positions, d)}
    if cfg.kind == "encoder":
        out |= {"type_emb": (cfg.type_vocab_size, d), "emb_ln_g": (d,), "emb_ln_b": (d,)}
    for i in range(cfg.n_layer):
        out |= layer_shapes(cfg, i)
    if cfg.kind == "decoder":
        out |= {"lnf_g": (d,), "lnf_b": (d,)}  # the head is tok_emb itself (tied)
    else:
        out |= {"pooler_w": (d, d), "pooler_b": (d,), "cls_w": (d, cfg.num_labels), "cls_b": (cfg.num_labels,)}
    return out


def param_count(cfg: TransformerConfig, *, with_classifier: bool = True) -> int:
    """Parameters, counting the tied head once. `with_classifier=False` leaves out an encoder's classifier
    (the published BERT counts are of the model without it)."""
    shapes = weight_shapes(cfg)
    if not with_classifier:
        shapes = {k: v for k, v in shapes.items() if not k.startswith("cls_")}
    return sum(int(np.prod(s)) for s in shapes.values())


def init_weights(cfg: TransformerConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights of the right shapes (nothing is downloaded): every array N(0, 0.02), layer-norm
    gains 1 + N(0, 0.02). Biases are random too, so a test that compares frameworks would see one that drops
    them."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, shape in weight_shapes(cfg).items():
        w = rng.standard_normal(shape, dtype=np.float32) * np.float32(INIT_STD)
        if name.endswith("_g"):
            w += np.float32(1.0)
        out[name] = w
    return out


def check_weights(cfg: TransformerConfig, weights: dict[str, np.ndarray]) -> None:
    """ValueError naming the first missing, extra or misshapen array."""
    want = weight_shapes(cfg)
    missing = [k for k in want if k not in weights]
    extra = [k for k in weights if k not in want]
    if missing or extra:
        raise ValueError(f"weights do not match the config: missing {missing[:3]}, unexpected {extra[:3]}")
    for k, shape in want.items():
        if tuple(weights[k].shape) != shape:
            raise ValueError(f"weight {k} has shape {tuple(weights[k].shape)}, the config needs {shape}")


def make_tokens(cfg: TransformerConfig, batch: int, length: int, seed: int = 0) -> np.ndarray:
    """Seeded token ids (batch, length), int64, the same for every framework. A decoder's training step takes
    `seq_len + 1` of them: inputs are the first `seq_len`, targets the last `seq_len` (next-token prediction)."""
    return np.random.default_rng(seed).integers(0, cfg.vocab_size, (batch, length), dtype=np.int64)


def make_labels(cfg: TransformerConfig, batch: int, seed: int = 1) -> np.ndarray:
    """Seeded class labels (batch,), int64, for an encoder's classification step."""
    return np.random.default_rng(seed).integers(0, cfg.num_labels, (batch,), dtype=np.int64)
