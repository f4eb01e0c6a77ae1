"""The same transformer in PyTorch, Keras 3 and JAX/Flax computes the same function: one framework's weights,
exported to the canonical arrays and loaded into the others, give the same logits and the same greedy tokens.

Tolerance: float32 everywhere; the logits of these tiny models are O(1) and each framework sums products in its
own order (and XLA/oneDNN pick their own kernels), so they agree to ~1e-5 absolute; 1e-4 leaves room for that and
still fails on any real difference (a transposed weight, a missing bias, the other GELU, a mask off by one).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from dlperf.models.transformer import PRESETS, init_weights, make_tokens

FAMILIES = ("torch", "tensorflow", "jax")
ATOL = 1e-4


def model_module(family: str):
    return importlib.import_module(f"dlperf.models.transformer.{family}_model")


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-tiny"])
@pytest.mark.parametrize("source", FAMILIES)
def test_weights_copied_from_one_framework_give_the_same_logits_in_the_others(name, source):
    cfg = PRESETS[name]
    tokens = make_tokens(cfg, 2, 12, seed=3)
    src = model_module(source).build(cfg, init_weights(cfg, seed=7))
    weights = model_module(source).to_weights(src)
    expected = model_module(source).logits(src, tokens)
    for target in FAMILIES:
        if target == source:
            continue
        dst = model_module(target).build(cfg, weights)
        got = model_module(target).logits(dst, tokens)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0, err_msg=f"{source} -> {target}")


@pytest.mark.parametrize("kv_cache", [True, False])
def test_greedy_generation_is_the_same_in_every_framework(kv_cache):
    cfg = PRESETS["gpt2-tiny"]
    weights = init_weights(cfg, seed=11)
    prompt = make_tokens(cfg, 2, 6, seed=5)
    outs = {fam: model_module(fam).generate(model_module(fam).build(cfg, weights), prompt, 5, kv_cache=kv_cache)
            for fam in FAMILIES}
    for fam, out in outs.items():
        np.testing.assert_array_equal(out, outs["torch"], err_msg=fam)
