"""The PyTorch transformer (`models.transformer.torch_model`) against the float64 NumPy reference: logits,
weights in and out, greedy generation with and without the KV cache, and the published parameter counts."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dlperf.models.transformer import (  # noqa: E402
    get_config,
    init_weights,
    make_tokens,
    param_count,
    reference,
    weight_shapes,
)
from dlperf.models.transformer import torch_model as tm  # noqa: E402

#: float32 against float64: each logit is a sum over a few hundred products per layer, each rounded at float32's
#: 6e-8; the errors seen are about 3e-7 of the largest logit. 1e-4 of it leaves ~300x room and still fails on
#: any real slip (a dropped bias moves logits by ~2e-2, a wrong GELU or eps by >1e-3).
RTOL = 1e-4


def _scaled(cfg, factor: float) -> dict[str, np.ndarray]:
    """Weights with every array but the layer-norm gains scaled: the random model then prefers different tokens
    at different steps (at the 0.02 initialisation it repeats one token, which would hide a cache bug)."""
    return {k: v if k.endswith("_g") else v * np.float32(factor) for k, v in init_weights(cfg, 0).items()}


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-tiny"])
@pytest.mark.parametrize("factor", [1.0, 10.0])
def test_logits_equal_the_reference(name, factor):
    cfg = get_config(name)
    w = _scaled(cfg, factor)
    tokens = make_tokens(cfg, 3, 17)
    got = tm.logits(tm.build(cfg, w), tokens)
    want = reference.forward(cfg, w, tokens)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * np.abs(want).max())


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-tiny"])
def test_weights_round_trip(name):
    cfg = get_config(name)
    w = init_weights(cfg, 3)
    model = tm.build(cfg, w)
    # a dense weight stored (in, out) is nn.Linear's weight transposed
    assert torch.equal(model.blocks[1].attn_qkv.weight, torch.from_numpy(w["h1.attn_qkv_w"]).T)
    back = tm.to_weights(model)
    assert set(back) == set(weight_shapes(cfg))
    for k, v in w.items():
        assert back[k].dtype == np.float32 and back[k].shape == v.shape
        np.testing.assert_array_equal(back[k], v, err_msg=k)
    again = tm.build(cfg, back)
    tokens = make_tokens(cfg, 2, 9)
    np.testing.assert_array_equal(tm.logits(again, tokens), tm.logits(model, tokens))


def test_default_weights_and_bad_weights():
    cfg = get_config("gpt2-tiny")
    np.testing.assert_array_equal(tm.to_weights(tm.build(cfg))["lnf_g"], init_weights(cfg, 0)["lnf_g"])
    w = init_weights(cfg, 0)
    del w["h0.mlp_fc_b"]
    with pytest.raises(ValueError, match="missing"):
        tm.build(cfg, w)


def test_the_head_is_the_token_embedding():
    """Tied: one parameter, so training the head trains the embedding (and it is counted once)."""
    model = tm.build(get_config("gpt2-tiny"))
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes.count((512, 64)) == 1
    out = model(torch.as_tensor(make_tokens(model.cfg, 1, 4)))
    out.sum().backward()
    assert model.tok_emb.weight.grad.abs().sum() > 0


def test_generation_with_and_without_cache_equals_the_reference():
    cfg = get_config("gpt2-tiny")
    w = _scaled(cfg, 10.0)
    model = tm.build(cfg, w)
    prompt = make_tokens(cfg, 3, 8, seed=5)
    want = reference.generate(cfg, w, prompt, 8)
    assert len(np.unique(want)) > 3  # a model that repeats one token would not test the cache
    cached = tm.generate(model, prompt, 8, kv_cache=True)
    uncached = tm.generate(model, prompt, 8, kv_cache=False)
    assert cached.dtype == np.int64 and cached.shape == (3, 8)
    np.testing.assert_array_equal(cached, want)
    np.testing.assert_array_equal(uncached, want)


def test_a_cached_step_gives_the_logits_of_the_whole_sequence():
    """Each decode step (one query against the cache, unmasked) equals the last row of a full causal pass."""
    cfg = get_config("gpt2-tiny")
    model = tm.build(cfg, _scaled(cfg, 10.0))
    seq = torch.as_tensor(make_tokens(cfg, 2, 12))
    cache = tm.KVCache(12)
    with torch.inference_mode():
        model(seq[:, :6], cache=cache, last_only=True)
        for end in range(7, 13):
            step = model(seq[:, end - 1:end], pos=end - 1, cache=cache, last_only=True)
            full = model(seq[:, :end])[:, -1]
            torch.testing.assert_close(step, full, rtol=1e-5, atol=1e-5 * float(full.abs().max()))


def test_generation_reuses_a_cache_and_refuses_misuse():
    cfg = get_config("gpt2-tiny")
    model = tm.build(cfg, _scaled(cfg, 10.0))
    prompt = torch.as_tensor(make_tokens(cfg, 2, 5))
    cache = tm.KVCache(9)
    with torch.inference_mode():
        a = tm.generate_tokens(model, prompt, 4, kv_cache=True, cache=cache).clone()
        first = cache.k[0]
        b = tm.generate_tokens(model, prompt, 4, kv_cache=True, cache=cache)
        assert cache.k[0] is first  # preallocated once, no allocation per call
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        with pytest.raises(ValueError, match="past the cache"):
            tm.generate_tokens(model, prompt, 6, kv_cache=True, cache=cache)  # needs 10 positions
        with pytest.raises(ValueError, match="exceed the context"):
            tm.generate_tokens(model, prompt, cfg.max_positions, kv_cache=False)
    with pytest.raises(ValueError, match="only a decoder"):
        tm.generate(tm.build(get_config("bert-tiny")), np.zeros((1, 3), np.int64), 2, kv_cache=True)


def test_gpt2_small_has_its_published_parameter_count():
    model = tm.build(get_config("gpt2-small"), device="meta")  # no storage: counting only
    assert tm.param_count(model) == 124_439_808


def test_bert_base_parameter_count():
    cfg = get_config("bert-base")
    model = tm.build(cfg, device="meta")
    assert tm.param_count(model) == param_count(cfg)
    without_classifier = tm.param_count(model) - sum(p.numel() for p in model.cls.parameters())
    assert without_classifier == 109_482_240  # the published BERT-base count


def test_building_does_not_load_torchs_compiler():
    """`build` fills every weight itself, so nothing of torch's own init may run: nn.Embedding's normal_ on the
    meta device goes through torch's Python reference and imports torch._dynamo, about 1 s of CPU in each
    worker that builds a transformer for inference. Checked in a fresh process, whose modules are its own."""
    import subprocess
    import sys

    code = ("import sys; from dlperf.models.transformer import get_config; "
            "from dlperf.models.transformer import torch_model as tm; "
            "m = tm.build(get_config('bert-tiny')); tm.build(get_config('gpt2-tiny'), device='meta'); "
            "print(m.tok_emb.weight.requires_grad, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]
