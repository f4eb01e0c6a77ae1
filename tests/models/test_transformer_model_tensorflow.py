"""The Keras 3 transformer against the float64 NumPy reference: logits, weights, parameter counts, generation.

Tolerance of the float32 logits: 1e-5 of the largest |logit|. float32 rounds at 6e-8 relative; the tiny models'
sums run over at most a few hundred terms through two blocks, and the measured error is about 4e-7 of the
largest logit (gpt2-tiny) and 3e-7 (bert-tiny), so the bound leaves a margin of 25x and would still catch a
wrong layout, a missing bias or the wrong GELU (those move logits by 1e-3 of the scale or more).
"""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import get_framework
from dlperf.models.transformer import (
    get_config,
    init_weights,
    make_tokens,
    param_count,
    reference,
    weight_shapes,
)

RTOL_OF_MAX = 1e-5


@pytest.fixture(scope="module")
def keras():
    """Keras, imported when a test here runs, not when pytest collects (each test process collects every file;
    TensorFlow's import is ~4 s of CPU), after dlperf's own TensorFlow set-up (log level, GPU memory growth)."""
    get_framework("tensorflow").import_module()
    import keras

    return keras


@pytest.fixture(scope="module")
def tm(keras):
    """dlperf's Keras transformer (imports Keras)."""
    from dlperf.models.transformer import tensorflow_model

    return tensorflow_model


@pytest.fixture(scope="module", params=["gpt2-tiny", "bert-tiny"])
def built(request, tm):
    cfg = get_config(request.param)
    weights = init_weights(cfg, 3)
    return cfg, weights, tm.build(cfg, weights)


@pytest.fixture(scope="module")
def gpt(tm):
    cfg = get_config("gpt2-tiny")
    weights = init_weights(cfg, 5)
    return cfg, weights, tm.build(cfg, weights)


def test_logits_equal_the_reference(built, tm):
    cfg, weights, model = built
    tokens = make_tokens(cfg, 2, 24, seed=7)
    want = reference.forward(cfg, weights, tokens)
    got = tm.logits(model, tokens)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=RTOL_OF_MAX * np.abs(want).max())


def test_weights_round_trip(built, tm):
    cfg, weights, model = built
    out = tm.to_weights(model)
    assert list(out) == list(weight_shapes(cfg))
    for name, w in weights.items():
        assert out[name].dtype == np.float32
        np.testing.assert_array_equal(out[name], w, err_msg=name)
    again = tm.build(cfg, out)  # and a model built from them computes the same logits
    tokens = make_tokens(cfg, 1, 8)
    np.testing.assert_array_equal(tm.logits(again, tokens), tm.logits(model, tokens))


def test_parameter_count_counts_the_tied_head_once(built):
    cfg, _, model = built
    assert model.count_params() == param_count(cfg)


def test_gpt2_small_has_the_published_parameter_count(tm):
    """Built bare (Keras' own initialisers, no weights copied: 2 s, 0.5 GB) to count its variables."""
    model = tm.Decoder(get_config("gpt2-small"))
    model.build((None, None))
    assert model.count_params() == 124_439_808


def test_weights_of_the_wrong_shape_are_refused(tm):
    cfg = get_config("gpt2-tiny")
    weights = init_weights(cfg, 0)
    weights["h0.attn_qkv_w"] = weights["h0.attn_qkv_w"][:, :-1]
    with pytest.raises(ValueError, match="h0.attn_qkv_w"):
        tm.build(cfg, weights)


@pytest.mark.parametrize("graph", [True, False], ids=["graph", "eager"])
def test_generation_with_and_without_cache_equals_the_reference(gpt, graph, tm):
    cfg, weights, model = gpt
    prompt = make_tokens(cfg, 3, 6, seed=11)
    want = reference.generate(cfg, weights, prompt, 7)
    for kv_cache in (True, False):
        got = tm.generate(model, prompt, 7, kv_cache=kv_cache, graph=graph)
        assert got.dtype == np.int64 and got.shape == (3, 7)
        np.testing.assert_array_equal(got, want, err_msg=f"kv_cache={kv_cache}")


@pytest.mark.parametrize("graph", [True, False], ids=["graph", "eager"])
def test_generation_from_a_one_token_prompt(gpt, graph, tm):
    """One query per step everywhere: the causal mask is left out where a step has one query (eager knows the
    length; the graph's prefill does not and masks)."""
    cfg, weights, model = gpt
    prompt = make_tokens(cfg, 2, 1, seed=12)
    want = reference.generate(cfg, weights, prompt, 3)
    for kv_cache in (True, False):
        np.testing.assert_array_equal(tm.generate(model, prompt, 3, kv_cache=kv_cache, graph=graph), want)


@pytest.mark.parametrize("kv_cache", [True, False], ids=["kv", "no-cache"])
def test_graph_generation_is_traced_once_not_per_token(gpt, kv_cache, tm, keras):
    """The Python bodies run once per trace in graph mode: once each over three calls of eight tokens (eager
    mode, the control, runs them once per token)."""
    cfg, _, model = gpt
    prompt = keras.ops.convert_to_tensor(make_tokens(cfg, 2, 5).astype(np.int32))
    graph = tm.Generator(model, 2, 5, 8, kv_cache=kv_cache, graph=True)
    eager = tm.Generator(model, 2, 5, 8, kv_cache=kv_cache, graph=False)
    for _ in range(3):
        tokens, _ = graph(prompt)
        np.testing.assert_array_equal(tokens, eager(prompt)[0])
    assert graph.traces == {"prefill": 1, "decode": 1}
    assert eager.traces == {"prefill": 3, "decode": 3 * 7}


def test_argmax_ties_go_to_the_lowest_id(tm, keras):
    logits = np.array([[0.0, 2.0, 1.0, 2.0], [3.0, 3.0, 3.0, 3.0]], np.float32)
    assert keras.ops.convert_to_numpy(tm.argmax_first(logits)).tolist() == [1, 0]


def test_mixed_precision_is_this_models_policy_only(tm, keras):
    """A bf16 model computes in bfloat16 on float32 weights, and the global policy stays float32."""
    cfg = get_config("gpt2-tiny")
    weights = init_weights(cfg, 0)
    model = tm.build(cfg, weights, policy="mixed_bfloat16")
    assert keras.config.dtype_policy().name == "float32"
    assert {v.dtype for v in model.weights} == {"float32"}
    assert model.blocks[0].qkv.compute_dtype == "bfloat16"
    tokens = make_tokens(cfg, 2, 8)
    want = reference.forward(cfg, weights, tokens)
    # bfloat16 keeps 8 bits of mantissa (0.4% relative): a few % of the largest logit bounds two blocks' rounding
    np.testing.assert_allclose(tm.logits(model, tokens), want, rtol=0, atol=0.05 * np.abs(want).max())
