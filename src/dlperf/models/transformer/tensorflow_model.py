"""The transformer in Keras 3 on the TensorFlow backend, loading and exporting `config`'s canonical weights.

Attention is written with `keras.ops` on one fused qkv `Dense` (the canonical (d, 3d) weight as it is), not with
`keras.layers.MultiHeadAttention`: that layer projects its key and value *inputs* itself (three (d, h, hd)
kernels), so a KV cache beside it could only hold the hidden states and re-project the whole history every token,
which is not a KV cache. Here each block projects the new tokens once and keeps their keys and values.

Mixed precision is a Keras dtype policy given to every layer of this model (`policy=`), never the global policy,
so nothing else built in the process inherits it; the softmax and the head's argmax run in float32.
Generation (`Generator`): greedy, the head on the last position only, argmax ties to the lowest id. With a KV
cache each layer keeps a preallocated key and value `tf.Variable` (batch, heads, prompt + new tokens, head_dim)
written in place at the token's position; a decode step attends to the filled part only (the positions up to
its own), so it does the work the cost model counts. In graph mode the prefill and the decode step are
`tf.function`s whose signatures fix the batch and leave the length open: each is traced once, not per token.
"""

from __future__ import annotations

import math
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from dlperf.frameworks.tensorflow_fw import tf_device
from dlperf.models.transformer.config import TransformerConfig, check_weights, init_weights, weight_shapes

Policy = str  # a Keras dtype policy name: "float32", "mixed_bfloat16", "mixed_float16"


def argmax_first(logits: Any) -> Any:
    """Argmax over the last axis with ties to the lowest id (tf.argmax leaves ties unspecified), int32."""
    top = ops.max(logits, axis=-1, keepdims=True)
    ids = ops.arange(ops.shape(logits)[-1], dtype="int32")
    return ops.min(ops.where(logits == top, ids, ops.shape(logits)[-1]), axis=-1)


class Block(keras.layers.Layer):
    """One transformer block: pre-LN (decoder, causal) or post-LN (encoder, bidirectional)."""

    def __init__(self, cfg: TransformerConfig, **kw: Any) -> None:
        super().__init__(**kw)
        pol, d, eps = kw.get("dtype"), cfg.d_model, cfg.layer_norm_eps
        self.cfg, self.decoder = cfg, cfg.kind == "decoder"
        self.ln1 = keras.layers.LayerNormalization(epsilon=eps, dtype=pol, name="ln1")
        self.qkv = keras.layers.Dense(3 * d, dtype=pol, name="attn_qkv")
        self.out = keras.layers.Dense(d, dtype=pol, name="attn_out")
        self.ln2 = keras.layers.LayerNormalization(epsilon=eps, dtype=pol, name="ln2")
        self.fc = keras.layers.Dense(cfg.ff, dtype=pol, name="mlp_fc")
        self.proj = keras.layers.Dense(d, dtype=pol, name="mlp_proj")

    def build(self, input_shape: Any) -> None:
        d, f = self.cfg.d_model, self.cfg.ff
        for layer, width in ((self.ln1, d), (self.qkv, d), (self.out, d), (self.ln2, d), (self.fc, d),
                             (self.proj, f)):
            layer.build((None, None, width))

    def call(self, x: Any) -> Any:
        return self.run(x)

    def run(self, x: Any, cache: tuple[Any, Any] | None = None, start: Any = 0) -> Any:
        """The block on x (B, T, d), whose first token is at position `start`; `cache`: this layer's key and
        value variables, written at [start, start + T) and read up to there. A plain method, not `__call__`:
        Keras converts a layer's call arguments to tensors, which would turn the cache variables into copies."""
        if self.decoder:
            x = x + self.attend(self.ln1(x), cache, start)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attend(x, cache, start))
        return self.ln2(x + self.mlp(x))

    def mlp(self, x: Any) -> Any:
        return self.proj(keras.activations.gelu(self.fc(x), approximate=self.cfg.gelu == "tanh"))

    def attend(self, x: Any, cache: tuple[Any, Any] | None, start: Any) -> Any:
        """softmax(q k^T / sqrt(hd)) v over the heads, then the output projection."""
        h, hd = self.cfg.n_head, self.cfg.head_dim
        b, t = ops.shape(x)[0], ops.shape(x)[1]

        def heads(y: Any) -> Any:  # (B, T, d) -> (B, h, T, hd); heads are contiguous inside q, k and v
            return ops.transpose(ops.reshape(y, (b, t, h, hd)), (0, 2, 1, 3))

        q, k, v = (heads(y) for y in ops.split(self.qkv(x), 3, axis=-1))
        if cache is not None:
            k_cache, v_cache = cache
            k_cache[:, :, start:start + t].assign(k)
            v_cache[:, :, start:start + t].assign(v)
            k, v = k_cache[:, :, :start + t], v_cache[:, :, :start + t]
        scores = ops.cast(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), "float32") * (1.0 / math.sqrt(hd))
        if self.decoder and t != 1:  # query i sits at position (keys - t) + i and sees the keys up to it
            n_keys = ops.shape(k)[2]
            visible = ops.arange(n_keys)[None, :] <= ops.arange(t)[:, None] + (n_keys - t)
            scores = ops.where(visible, scores, float("-inf"))
        probs = ops.cast(ops.softmax(scores, axis=-1), v.dtype)
        merged = ops.reshape(ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3)), (b, t, h * hd))
        return self.out(merged)


def _build_embeddings(model: keras.Model, embeddings: list[Any], norms: list[Any]) -> None:
    """Create the variables of a model's embeddings, layer norms and blocks (Keras asks a model with
    sublayers to build them itself)."""
    for emb in embeddings:
        emb.build((None, None))
    for norm in norms:
        norm.build((None, None, model.cfg.d_model))
    for block in model.blocks:
        block.build((None, None, model.cfg.d_model))


class Decoder(keras.Model):
    """GPT-2's shape: learned positions, pre-LN causal blocks, a final LN, the head tied to the token embedding."""

    def __init__(self, cfg: TransformerConfig, policy: Policy = "float32") -> None:
        super().__init__(dtype=policy, name="decoder")
        self.cfg = cfg
        self.tok = keras.layers.Embedding(cfg.vocab_size, cfg.d_model, dtype=policy, name="tok_emb")
        self.pos = keras.layers.Embedding(cfg.max_positions, cfg.d_model, dtype=policy, name="pos_emb")
        self.blocks = [Block(cfg, dtype=policy, name=f"h{i}") for i in range(cfg.n_layer)]
        self.lnf = keras.layers.LayerNormalization(epsilon=cfg.layer_norm_eps, dtype=policy, name="lnf")

    def build(self, input_shape: Any) -> None:
        _build_embeddings(self, [self.tok, self.pos], [self.lnf])

    def body(self, tokens: Any, caches: list[tuple[Any, Any]] | None = None, start: Any = 0) -> Any:
        """The blocks' output (before the final LN) for tokens (B, T) at positions start..start+T-1."""
        x = self.tok(tokens) + self.pos(ops.arange(ops.shape(tokens)[1]) + start)[None]
        for i, block in enumerate(self.blocks):
            x = block.run(x, None if caches is None else caches[i], start)
        return x

    def head(self, x: Any) -> Any:
        """Logits of the final-LN'd hidden states: x @ tok_emb^T (the tied head, in the compute dtype)."""
        return ops.matmul(self.lnf(x), ops.transpose(ops.cast(self.tok.embeddings, self.compute_dtype)))

    def call(self, tokens: Any) -> Any:
        return self.head(self.body(tokens))

    def next_token(self, tokens: Any, caches: list[tuple[Any, Any]] | None = None, start: Any = 0) -> Any:
        """The greedy next token (B,) int32 after tokens (B, T): the head on the last position only."""
        return argmax_first(ops.cast(self.head(self.body(tokens, caches, start)[:, -1]), "float32"))


class Encoder(keras.Model):
    """BERT's shape: token + position + token-type embeddings and their LN, post-LN blocks, pooler, classifier.
    Token types are all 0 (one segment), as in the reference's default."""

    def __init__(self, cfg: TransformerConfig, policy: Policy = "float32") -> None:
        super().__init__(dtype=policy, name="encoder")
        self.cfg = cfg
        d = cfg.d_model
        self.tok = keras.layers.Embedding(cfg.vocab_size, d, dtype=policy, name="tok_emb")
        self.pos = keras.layers.Embedding(cfg.max_positions, d, dtype=policy, name="pos_emb")
        self.typ = keras.layers.Embedding(cfg.type_vocab_size, d, dtype=policy, name="type_emb")
        self.emb_ln = keras.layers.LayerNormalization(epsilon=cfg.layer_norm_eps, dtype=policy, name="emb_ln")
        self.blocks = [Block(cfg, dtype=policy, name=f"h{i}") for i in range(cfg.n_layer)]
        self.pooler = keras.layers.Dense(d, activation="tanh", dtype=policy, name="pooler")
        self.cls = keras.layers.Dense(cfg.num_labels, dtype=policy, name="cls")

    def build(self, input_shape: Any) -> None:
        _build_embeddings(self, [self.tok, self.pos, self.typ], [self.emb_ln])
        self.pooler.build((None, self.cfg.d_model))
        self.cls.build((None, self.cfg.d_model))

    def call(self, tokens: Any) -> Any:
        x = self.tok(tokens) + self.pos(ops.arange(ops.shape(tokens)[1]))[None] + self.typ(ops.zeros_like(tokens))
        x = self.emb_ln(x)
        for block in self.blocks:
            x = block.run(x)
        return self.cls(self.pooler(x[:, 0]))


def variables(model: Decoder | Encoder) -> dict[str, Any]:
    """The model's variables by canonical name (`config.weight_shapes`' names, in its order)."""
    out = {"tok_emb": model.tok.embeddings, "pos_emb": model.pos.embeddings}
    if isinstance(model, Encoder):
        out |= {"type_emb": model.typ.embeddings, "emb_ln_g": model.emb_ln.gamma, "emb_ln_b": model.emb_ln.beta}
    for i, blk in enumerate(model.blocks):
        for part, layer in (("ln1", blk.ln1), ("ln2", blk.ln2)):
            out |= {f"h{i}.{part}_g": layer.gamma, f"h{i}.{part}_b": layer.beta}
        for part, layer in (("attn_qkv", blk.qkv), ("attn_out", blk.out), ("mlp_fc", blk.fc), ("mlp_proj", blk.proj)):
            out |= {f"h{i}.{part}_w": layer.kernel, f"h{i}.{part}_b": layer.bias}
    if isinstance(model, Decoder):
        out |= {"lnf_g": model.lnf.gamma, "lnf_b": model.lnf.beta}
    else:
        out |= {"pooler_w": model.pooler.kernel, "pooler_b": model.pooler.bias,
                "cls_w": model.cls.kernel, "cls_b": model.cls.bias}
    order = list(weight_shapes(model.cfg))
    assert sorted(out) == sorted(order), "the Keras model's variables do not match config.weight_shapes"
    return {k: out[k] for k in order}


def build(cfg: TransformerConfig, weights: dict[str, np.ndarray] | None = None, *, device: str = "cpu",
          policy: Policy = "float32") -> Decoder | Encoder:
    """The Keras model of `cfg` on `device`, holding `weights` (default: `init_weights(cfg, 0)`); `policy` is its
    own dtype policy (fp32 master weights either way)."""
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(f"Keras runs on {keras.backend.backend()!r}; this model needs KERAS_BACKEND=tensorflow")
    weights = init_weights(cfg, 0) if weights is None else weights
    check_weights(cfg, weights)
    with tf.device(tf_device(device)):
        model = (Decoder if cfg.kind == "decoder" else Encoder)(cfg, policy)
        model.build((None, None))
        for name, var in variables(model).items():
            var.assign(np.asarray(weights[name], np.float32))
    return model


def to_weights(model: Decoder | Encoder) -> dict[str, np.ndarray]:
    """The model's weights as canonical float32 arrays."""
    return {k: np.array(v.numpy(), np.float32) for k, v in variables(model).items()}


def model_device(model: Decoder | Encoder) -> str:
    """The TensorFlow device its variables live on (where `logits` and `generate` run)."""
    return str(model.tok.embeddings.value.device)


def logits(model: Decoder | Encoder, tokens: np.ndarray) -> np.ndarray:
    """float32 logits, shaped as `reference.forward`'s: (B, T, vocab) or (B, num_labels)."""
    with tf.device(model_device(model)):
        return np.asarray(ops.convert_to_numpy(ops.cast(model(np.asarray(tokens, np.int32)), "float32")))


class Generator:
    """Greedy decoding of `new_tokens` tokens after a (batch, prompt_len) prompt, with or without a KV cache,
    as `tf.function`s (graph) or op by op (eager). `traces` counts how often each function was traced
    (a Python body runs once per trace in graph mode, once per call in eager)."""

    def __init__(self, model: Decoder, batch: int, prompt_len: int, new_tokens: int, *, kv_cache: bool,
                 graph: bool, jit_compile: bool = False) -> None:
        cfg = model.cfg
        if prompt_len + new_tokens > cfg.max_positions:
            raise ValueError(f"{prompt_len} + {new_tokens} tokens exceed the context of {cfg.max_positions}")
        self.model, self.prompt_len, self.new_tokens, self.kv_cache = model, prompt_len, new_tokens, kv_cache
        self.traces = {"prefill": 0, "decode": 0}
        shape = (batch, cfg.n_head, prompt_len + new_tokens, cfg.head_dim)
        self.caches = [(tf.Variable(tf.zeros(shape, model.compute_dtype), trainable=False),
                        tf.Variable(tf.zeros(shape, model.compute_dtype), trainable=False))
                       for _ in range(cfg.n_layer)] if kv_cache else None
        self.positions = [tf.constant(i, tf.int32) for i in range(prompt_len + new_tokens)]
        self._prefill, self._decode = self._prefill_py, self._decode_py
        if graph:
            seq = tf.TensorSpec((batch, None), tf.int32)
            xla = {"jit_compile": True} if jit_compile else {}
            self._prefill = tf.function(self._prefill_py, input_signature=[seq], **xla)
            self._decode = (tf.function(self._decode_py, input_signature=[tf.TensorSpec((batch,), tf.int32),
                                                                           tf.TensorSpec((), tf.int32)], **xla)
                            if kv_cache else tf.function(self._decode_py, input_signature=[seq], **xla))

    def _prefill_py(self, tokens: Any) -> Any:
        self.traces["prefill"] += 1
        return self.model.next_token(tokens, self.caches, 0)

    def _decode_py(self, tokens: Any, position: Any = None) -> Any:
        """KV cache: the last token (B,) at `position`; none: the whole sequence (B, T) again."""
        self.traces["decode"] += 1
        if self.kv_cache:
            return self.model.next_token(tokens[:, None], self.caches, position)
        return self.model.next_token(tokens)

    def __call__(self, prompt: Any) -> tuple[np.ndarray, dict[str, float]]:
        """The new tokens (B, new_tokens) int64, and {"ttft_s", "decode_s"}: until token 1 is on the host, and
        the rest of the call (its end synced by reading every token on the host)."""
        start = time.perf_counter()
        token = self._prefill(prompt)
        token.numpy()  # token 1 known on the host: the device has finished the prefill
        first_s = time.perf_counter()
        out, seq = [token], prompt
        for j in range(1, self.new_tokens):
            if self.kv_cache:
                token = self._decode(token, self.positions[self.prompt_len + j - 1])
            else:
                seq = tf.concat([seq, token[:, None]], axis=1)
                token = self._decode(seq)
            out.append(token)
        tokens = tf.stack(out, axis=1).numpy().astype(np.int64)
        return tokens, {"ttft_s": first_s - start, "decode_s": time.perf_counter() - first_s}


def generate(model: Decoder, prompt: np.ndarray, new_tokens: int, *, kv_cache: bool, graph: bool = True) -> np.ndarray:
    """Greedy generation on the model's device: (B, new_tokens) int64 token ids."""
    prompt = np.asarray(prompt, np.int32)
    with tf.device(model_device(model)):
        gen = Generator(model, prompt.shape[0], prompt.shape[1], new_tokens, kv_cache=kv_cache, graph=graph)
        return gen(tf.constant(prompt))[0]
