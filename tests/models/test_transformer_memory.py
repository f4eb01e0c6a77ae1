"""The transformer's memory estimate (models/transformer/memory.py): its exact parts exactly (parameters, AdamW's
state, the KV cache), and the activations it says autograd keeps against what PyTorch keeps, counted with
`torch.autograd.graph.saved_tensors_hooks` on a tiny model written here in plain torch ops after
models/transformer/reference.py (F.linear for the products, F.layer_norm, F.gelu, and either
F.scaled_dot_product_attention (fused) or softmax(q k^T) v (math)).

What the count includes beyond the estimate's `saved_bytes`, each named: the token ids the embedding lookup keeps
and an encoder's labels (the estimate's `input_bytes`), and the loss's 4-byte total weight (a scalar). The rest
agrees to the byte in fp32 and under bf16 autocast, decoder and encoder, fused and math attention.
"""

from __future__ import annotations

import math

import pytest

from dlperf.models.transformer import get_config, init_weights, make_labels, make_tokens, param_count
from dlperf.models.transformer import memory as M
from dlperf.models.transformer.cost import matmul_params

torch = pytest.importorskip("torch")
F = torch.nn.functional

#: The scalars the loss keeps that the estimate leaves out (cross-entropy's total weight, 4 bytes).
LOSS_SCALARS_BYTES = 4


def _forward_loss(cfg, w, tokens, labels, attention):
    """The reference's model in torch ops (weights stored (in, out), hence F.linear(x, W.T, b)); returns the loss."""
    b, t = tokens.shape[0], tokens.shape[1] - (1 if cfg.kind == "decoder" else 0)
    d, h, hd = cfg.d_model, cfg.n_head, cfg.head_dim
    inputs = tokens[:, :t]

    def ln(x, p):
        return F.layer_norm(x, (d,), w[p + "_g"], w[p + "_b"], cfg.layer_norm_eps)

    def dense(x, name):
        return F.linear(x, w[name + "_w"].T, w[name + "_b"])

    def attend(x, p, causal):
        qkv = dense(x, p + "attn_qkv")
        q, k, v = (qkv[..., j * d:(j + 1) * d].reshape(b, t, h, hd).transpose(1, 2) for j in range(3))
        if attention == "fused":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            if causal:
                s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
            o = torch.softmax(s, -1) @ v
        return dense(o.transpose(1, 2).reshape(b, t, d), p + "attn_out")

    def mlp(x, p):
        return dense(F.gelu(dense(x, p + "mlp_fc"), approximate="tanh" if cfg.gelu == "tanh" else "none"),
                     p + "mlp_proj")

    x = w["tok_emb"][inputs] + w["pos_emb"][:t]
    if cfg.kind == "decoder":
        for i in range(cfg.n_layer):
            p = f"h{i}."
            x = x + attend(ln(x, p + "ln1"), p, True)
            x = x + mlp(ln(x, p + "ln2"), p)
        logits = F.linear(ln(x, "lnf"), w["tok_emb"])
        return F.cross_entropy(logits.reshape(-1, cfg.vocab_size).float(), tokens[:, 1:].reshape(-1))
    x = ln(x + w["type_emb"][0], "emb_ln")  # token type 0 everywhere: a broadcast row, no index array
    for i in range(cfg.n_layer):
        p = f"h{i}."
        x = ln(x + attend(x, p, False), p + "ln1")
        x = ln(x + mlp(x, p), p + "ln2")
    pooled = torch.tanh(dense(x[:, 0], "pooler"))
    return F.cross_entropy(dense(pooled, "cls").float(), labels)


def saved_bytes_in_torch(cfg, batch, seq_len, precision, attention) -> int:
    """Bytes of the distinct storages autograd saves in one forward, parameters left out."""
    w = {k: torch.tensor(v, requires_grad=True) for k, v in init_weights(cfg).items()}
    params = {p.untyped_storage().data_ptr() for p in w.values()}
    extra = 1 if cfg.kind == "decoder" else 0
    tokens = torch.tensor(make_tokens(cfg, batch, seq_len + extra))
    labels = torch.tensor(make_labels(cfg, batch))
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        loss = _forward_loss(cfg, w, tokens, labels, attention)
    loss.backward()  # the graph is whole: every saved tensor was needed
    return sum(seen.values())


@pytest.mark.parametrize("attention", ["fused", "math"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize(("model", "batch", "seq_len"), [("gpt2-tiny", 2, 16), ("gpt2-tiny", 3, 24),
                                                         ("bert-tiny", 2, 16)])
def test_saved_activations_match_what_torch_saves(model, batch, seq_len, precision, attention):
    cfg = get_config(model)
    est = M.train_memory(cfg, batch, seq_len, precision=precision, attention=attention)
    counted = saved_bytes_in_torch(cfg, batch, seq_len, precision, attention)
    assert counted == est.saved_bytes + est.input_bytes + LOSS_SCALARS_BYTES


def test_exact_parts():
    cfg = get_config("gpt2-small")
    n = 124_439_808
    m = M.train_memory(cfg, 8, 1024)
    assert (m.params_bytes, m.grads_bytes, m.optimizer_bytes) == (4 * n, 4 * n, 8 * n)
    assert m.weight_copies_bytes == 0 and m.input_bytes == 8 * 1025 * 8
    bf = M.train_memory(cfg, 8, 1024, precision="bf16")
    assert bf.params_bytes == 4 * n and bf.optimizer_bytes == 8 * n  # fp32 master weights and state
    assert bf.weight_copies_bytes == 2 * matmul_params(cfg) == 2 * (12 * (4 * 768**2 + 2 * 768 * 3072) + 50257 * 768)
    # GPT-2 small's KV cache for 1024 positions: 2 x 12 x 768 values per token = 36 KiB per token in fp32
    assert M.kv_cache_bytes(cfg, 1, 1024) == 2 * 12 * 1024 * 768 * 4 == 75_497_472
    assert M.kv_cache_bytes(cfg, 4, 100, precision="bf16") == 2 * 12 * 4 * 100 * 768 * 2
    g = M.generate_memory(cfg, 2, 32, 16)
    assert g.kv_cache_bytes == M.kv_cache_bytes(cfg, 2, 32 + 16)  # what the torch, Keras and JAX builders allocate
    assert g.params_bytes == 4 * n and g.logits_bytes == 2 * 50257 * 4
    assert M.generate_memory(cfg, 2, 32, 16, kv_cache=False).kv_cache_bytes == 0
    enc = M.train_memory(get_config("bert-base"), 2, 128)
    assert enc.params_bytes == 4 * param_count(get_config("bert-base"))


def test_the_parts_scale_as_the_module_says():
    cfg = get_config("gpt2-mini")
    fused = M.train_memory(cfg, 4, 256)
    math_ = M.train_memory(cfg, 4, 256, attention="math")
    # the math path keeps the T x T probabilities (and the mask) instead of the log-sum-exp
    extra = cfg.n_layer * (4 * cfg.n_head * 256 * 256 * 4 + 256 * 256 - 4 * cfg.n_head * 256 * 4)
    assert math_.activations_bytes - fused.activations_bytes == extra
    # activations grow linearly with the batch on the fused path; the weights do not
    assert M.train_memory(cfg, 8, 256).activations_bytes == 2 * fused.activations_bytes
    assert M.train_memory(cfg, 8, 256).params_bytes == fused.params_bytes
    host = M.train_memory(cfg, 4, 256, where="host")
    assert host.activation_grads_bytes > fused.activation_grads_bytes
    assert fused.total_bytes == sum(v for k, v in fused.to_dict().items()
                                    if k.endswith("_bytes") and k not in ("activations_bytes", "saved_bytes",
                                                                          "total_bytes")) + fused.activations_bytes
    inf = M.infer_memory(cfg, 4, 256)
    assert inf.logits_bytes == 4 * 256 * cfg.vocab_size * 4 and inf.total_bytes < fused.total_bytes
    no_cache, cache = M.generate_memory(cfg, 2, 64, 64, kv_cache=False), M.generate_memory(cfg, 2, 64, 64)
    assert no_cache.working_set_bytes > cache.working_set_bytes


@pytest.mark.parametrize(("call", "message"), [
    (lambda: M.train_memory(get_config("gpt2-tiny"), 0, 8), "at least 1"),
    (lambda: M.train_memory(get_config("gpt2-tiny"), 1, 999), "exceeds the context"),
    (lambda: M.train_memory(get_config("gpt2-tiny"), 1, 8, precision="fp8"), "precision"),
    (lambda: M.train_memory(get_config("gpt2-tiny"), 1, 8, attention="flash2"), "attention"),
    (lambda: M.train_memory(get_config("gpt2-tiny"), 1, 8, where="disk"), "where"),
    (lambda: M.kv_cache_bytes(get_config("bert-tiny"), 1, 8), "only a decoder"),
    (lambda: M.generate_memory(get_config("gpt2-tiny"), 1, 100, 100), "exceeds the context"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
