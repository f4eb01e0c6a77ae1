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


def test_generation_past_64_tokens_equals_the_reference(decoder):
    """62 + 4 tokens: every no-cache step runs its exact length, one compilation each (all in the first call).
    Lengths 62..65 cross 64 (the old padded length) as 60..67 did, with half the compilations."""
    cfg, weights, _ = decoder
    model = J.build(cfg, weights)
    prompt = make_tokens(cfg, 1, 62, seed=2)
    want = reference.generate(cfg, weights, prompt, 4)
    np.testing.assert_array_equal(J.generate(model, prompt, 4, kv_cache=False), want)
    np.testing.assert_array_equal(J.generate(model, prompt, 4, kv_cache=True), want)
    assert model.traces["nocache"] == 4  # lengths 62..65


def test_decode_step_compiles_once():
    """5 new tokens: 4 decode steps share one compilation, and the no-cache path compiles one per length (each
    no-cache length is a compilation of its own, so more tokens would only add compile time, not checks)."""
    cfg = PRESETS["gpt2-tiny"]
    model = J.build(cfg)
    prompt = make_tokens(cfg, 2, 5, seed=1)
    first = J.generate(model, prompt, 5, kv_cache=True)
    assert model.traces["decode"] == 1 and model.traces["prefill"] == 1
    np.testing.assert_array_equal(J.generate(model, prompt, 5, kv_cache=True), first)
    assert model.traces["decode"] == 1 and model.traces["prefill"] == 1  # the second call compiles nothing
    J.generate(model, prompt, 5, kv_cache=False)
    assert model.traces["nocache"] == 5  # one exact length per token
    J.generate(model, prompt, 5, kv_cache=False)
    assert model.traces["nocache"] == 5  # the second call compiles nothing


def test_one_cache_serves_consecutive_generations_of_different_prompts(decoder):
    """The cache is allocated once and donated to each prefill: the second call's slots beyond its position
    hold the first call's keys (stale), which must stay masked or be overwritten."""
    cfg, weights, model = decoder
    cache = J.new_cache(model, 2, 6 + 7)
    for seed in (3, 4, 3):
        prompt = make_tokens(cfg, 2, 6, seed=seed)
        before = cache.buffers[0][0]
        x = jax.device_put(np.asarray(prompt, dtype=np.int32), model.device)
        out = np.asarray(J.generate_on_device(model, x, 7, kv_cache=True, cache=cache))
        np.testing.assert_array_equal(out, reference.generate(cfg, weights, prompt, 7))
        assert before.is_deleted()  # donated into the prefill: the cache was reused, not copied
        assert cache.buffers[0][0].shape == (2, 13, cfg.n_head, cfg.head_dim)
    with pytest.raises(ValueError, match="the cache holds 2 x 13"):
        J.generate_on_device(model, x, 8, kv_cache=True, cache=cache)


def _xla_flops(fn, *args, **kw) -> float:
    return fn.lower(*args, **kw).compile().cost_analysis()["flops"]


#: XLA's flops over cost.py's, for generation that runs the lengths cost.py counts. XLA also counts the
#: element-wise work cost.py counts 0 (layer norm, GELU, softmax, bias adds): on gpt2-tiny the forward of the
#: prompt alone is 1.037x cost.py, so an exact-length step is 1.03-1.07x. Padding the no-cache steps to 64
#: tokens (before) made the first step of this case 2.16x and the whole call 1.45x.
XLA_OVER_COST = (1.0, 1.07)


def test_xla_flops_of_no_cache_generation_equal_the_cost_model(decoder):
    from dlperf.models.transformer import cost

    cfg, _, model = decoder
    b, p, n = 1, 16, 8  # 8 steps (lengths 16..23), each lowered and compiled: padding to any bucket would show
    fwd = _xla_flops(model.fns["forward"], model.params, jax.numpy.zeros((b, p), "int32"))
    assert XLA_OVER_COST[0] <= fwd / cost.forward_flops(cfg, b, p) <= XLA_OVER_COST[1]
    buf = jax.numpy.zeros((b, p + n), "int32")
    steps = [_xla_flops(model.fns["nocache"], model.params, buf, length=p + j) for j in range(n)]
    first = steps[0] / cost.prefill_flops(cfg, b, p)
    whole = sum(steps) / cost.generate_flops(cfg, b, p, n, kv_cache=False)
    assert XLA_OVER_COST[0] <= first <= XLA_OVER_COST[1], first
    assert XLA_OVER_COST[0] <= whole <= XLA_OVER_COST[1], whole
    cache = J.new_cache(model, b, p + n).buffers
    prefill = _xla_flops(model.fns["prefill"], model.params, cache, jax.numpy.zeros((b, p), "int32"))
    assert XLA_OVER_COST[0] <= prefill / cost.prefill_flops(cfg, b, p) <= XLA_OVER_COST[1]


def test_an_encoder_does_not_generate():
    cfg = PRESETS["bert-tiny"]
    with pytest.raises(ValueError, match="only a decoder"):
        J.generate(J.build(cfg), make_tokens(cfg, 1, 4), 2, kv_cache=True)
