"""The JAX/Flax transformer (`models.transformer.jax_model`) against the float64 NumPy reference.

Tolerance: float32 logits to 1e-5 absolute. The tiny models' logits are O(1) (decoder) and O(0.1) (encoder);
float32 rounding (eps 1.2e-7) accumulated over a few layers of sums of 64-512 products gives ~3e-7, so 1e-5 is
30x that and still fails on any structural error (a dropped bias or a transposed weight moves logits by ~1e-2).
The model asks every float32 product for Precision.HIGHEST; on XLA's CPU backend float32 dots are float32
anyway (the flag matters on GPUs, where the default would be TF32).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dlperf.models.transformer import PRESETS, get_config, init_weights, make_tokens, param_count, reference
from dlperf.models.transformer import jax_model as J

ATOL = 1e-5


@pytest.fixture(scope="module", params=["gpt2-tiny", "bert-tiny"])
def built(request):
    cfg = PRESETS[request.param]
    weights = init_weights(cfg, seed=7)
    return cfg, weights, J.build(cfg, weights)


@pytest.fixture(scope="module")
def decoder():
    cfg = PRESETS["gpt2-tiny"]
    weights = init_weights(cfg, seed=11)
    return cfg, weights, J.build(cfg, weights)


def test_logits_equal_the_reference_in_float32(built):
    cfg, weights, model = built
    tokens = make_tokens(cfg, 2, 12, seed=3)
    got, want = J.logits(model, tokens), reference.forward(cfg, weights, tokens)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_logits_stay_close(built, dtype):
    """Products in the low dtype, params float32: within 1e-2 of the reference (bf16 has 8 bits of mantissa;
    measured: 3e-3 for gpt2-tiny's bf16), and the params are still float32."""
    cfg, weights, _ = built
    model = J.build(cfg, weights, dtype=dtype)
    tokens = make_tokens(cfg, 2, 12, seed=3)
    np.testing.assert_allclose(J.logits(model, tokens), reference.forward(cfg, weights, tokens), atol=1e-2, rtol=0)
    assert {leaf.dtype for leaf in jax.tree.leaves(model.params)} == {np.dtype("float32")}


def test_to_weights_round_trips(built):
    cfg, weights, model = built
    out = J.to_weights(model)
    assert list(out) == list(weights)
    for name, w in weights.items():
        assert out[name].dtype == np.float32 and np.array_equal(out[name], w), name


def test_parameter_pytree_counts_the_tied_head_once(built):
    cfg, _, model = built
    assert sum(leaf.size for leaf in jax.tree.leaves(model.params)) == param_count(cfg)


@pytest.mark.parametrize("name", ["gpt2-small", "bert-base"])
def test_published_sizes_by_shape_alone(name):
    """jax.eval_shape: the full-size pytree as shapes, nothing allocated."""
    cfg = PRESETS[name]
    shapes = J.param_shapes(J.FlaxTransformer(cfg))
    assert sum(int(np.prod(s.shape)) for s in jax.tree.leaves(shapes)) == param_count(cfg)
    if name == "gpt2-small":
        assert param_count(cfg) == 124_439_808


def test_param_paths_follow_the_name_rule():
    assert J.param_path("h3.attn_qkv_w") == ("h3", "attn_qkv", "kernel")
    assert J.param_path("h0.ln1_b") == ("h0", "ln1", "bias")
    assert J.param_path("tok_emb") == ("tok_emb", "embedding")
    assert J.param_path("emb_ln_g") == ("emb_ln", "scale")


def test_weights_of_another_shape_are_refused():
    cfg = PRESETS["gpt2-tiny"]
    with pytest.raises(ValueError, match="shape"):
        J.build(cfg, init_weights(get_config("gpt2-tiny", d_model=32), 0))


@pytest.mark.parametrize("seed", [5, 6])
def test_generation_with_and_without_cache_equals_the_reference(decoder, seed):
    cfg, weights, model = decoder
    prompt = make_tokens(cfg, 2, 6, seed=seed)
    want = reference.generate(cfg, weights, prompt, 8)
    cached = J.generate(model, prompt, 8, kv_cache=True)
    assert cached.dtype == np.int64 and cached.shape == (2, 8)
    np.testing.assert_array_equal(cached, want)
    np.testing.assert_array_equal(J.generate(model, prompt, 8, kv_cache=False), want)


def test_generation_across_a_padding_bucket_equals_the_reference(decoder):
    """Without a cache the sequence is padded to multiples of NO_CACHE_BUCKET: 60 + 8 tokens cross one."""
    cfg, weights, _ = decoder
    model = J.build(cfg, weights)
    prompt = make_tokens(cfg, 1, J.NO_CACHE_BUCKET - 4, seed=2)
    want = reference.generate(cfg, weights, prompt, 8)
    np.testing.assert_array_equal(J.generate(model, prompt, 8, kv_cache=False), want)
    np.testing.assert_array_equal(J.generate(model, prompt, 8, kv_cache=True), want)
    assert model.traces["nocache"] == 2  # one compilation per bucket: 64 and 68 tokens


def test_decode_step_compiles_once():
    cfg = PRESETS["gpt2-tiny"]
    model = J.build(cfg)
    prompt = make_tokens(cfg, 2, 5, seed=1)
    first = J.generate(model, prompt, 10, kv_cache=True)
    assert model.traces["decode"] == 1 and model.traces["prefill"] == 1
    np.testing.assert_array_equal(J.generate(model, prompt, 10, kv_cache=True), first)
    assert model.traces["decode"] == 1 and model.traces["prefill"] == 1  # the second call compiles nothing
    J.generate(model, prompt, 10, kv_cache=False)
    J.generate(model, prompt, 10, kv_cache=False)
    assert model.traces["nocache"] == 1  # 15 tokens fit one bucket: every length runs one compiled step


def test_an_encoder_does_not_generate():
    cfg = PRESETS["bert-tiny"]
    with pytest.raises(ValueError, match="only a decoder"):
        J.generate(J.build(cfg), make_tokens(cfg, 1, 4), 2, kv_cache=True)
