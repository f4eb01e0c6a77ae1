"""The transformer's definition: published parameter counts, presets, weights, the workload's parameters."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from dlperf.models.transformer import (
    PRESETS,
    check_weights,
    cost,
    get_config,
    init_weights,
    param_count,
    reference,
    weight_shapes,
)
from dlperf.workloads import get_workload


def test_gpt2_small_has_the_published_parameter_count():
    assert param_count(PRESETS["gpt2-small"]) == 124_439_808  # GPT-2 small, tied embeddings


@pytest.mark.parametrize(("name", "count"), [("gpt2-medium", 354_823_168), ("bert-base", 109_482_240),
                                              ("bert-large", 335_141_888)])
def test_other_published_counts(name, count):
    assert param_count(PRESETS[name], with_classifier=False) == count


def test_overrides_and_errors():
    cfg = get_config("gpt2-small", n_layer=2, d_model=None)
    assert (cfg.n_layer, cfg.d_model) == (2, 768)
    with pytest.raises(KeyError, match="unknown transformer 'gpt5'"):
        get_config("gpt5")
    with pytest.raises(ValidationError, match="not a multiple of n_head"):
        get_config("gpt2-tiny", d_model=66)


def test_weights_are_seeded_and_checked():
    cfg = PRESETS["gpt2-tiny"]
    a, b = init_weights(cfg, seed=1), init_weights(cfg, seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert {k: v.shape for k, v in a.items()} == weight_shapes(cfg)
    assert all(v.dtype == np.float32 for v in a.values())
    del a["lnf_b"]
    with pytest.raises(ValueError, match="missing \\['lnf_b'\\]"):
        check_weights(cfg, a)


def test_reference_decoder_is_causal():
    """Changing a later token leaves earlier positions' logits unchanged (the mask), and changes its own."""
    cfg = PRESETS["gpt2-tiny"]
    w = init_weights(cfg)
    tokens = np.array([[1, 2, 3, 4, 5]])
    changed = tokens.copy()
    changed[0, 3] = 99
    a, b = reference.forward(cfg, w, tokens), reference.forward(cfg, w, changed)
    np.testing.assert_array_equal(a[:, :3], b[:, :3])
    assert not np.allclose(a[:, 3:], b[:, 3:])


def test_reference_generation_is_greedy():
    cfg = PRESETS["gpt2-tiny"]
    w = init_weights(cfg)
    prompt = np.array([[7, 8, 9]])
    out = reference.generate(cfg, w, prompt, 2)
    assert out[0, 0] == reference.forward(cfg, w, prompt)[0, -1].argmax()
    assert out[0, 1] == reference.forward(cfg, w, np.array([[7, 8, 9, out[0, 0]]]))[0, -1].argmax()


def test_train_flops_closed_form():
    """Per token, 6 N + 12 L d T (PaLM's model FLOPs), N the weights in matrix products (the tied head once)."""
    cfg = PRESETS["gpt2-small"]
    t = 1024
    n = 12 * (4 * 768**2 + 2 * 768 * 3072) + 50257 * 768
    assert cost.matmul_params(cfg) == n
    assert cost.train_flops_per_token(cfg, t) == pytest.approx(6 * n + 12 * 12 * 768 * t, rel=1e-12)


def test_generation_cost_cache_against_no_cache():
    """Without a cache every step reruns the sequence: more FLOPs, and equal for one new token."""
    cfg = PRESETS["gpt2-tiny"]
    assert cost.generate_flops(cfg, 2, 16, 1, True) == cost.generate_flops(cfg, 2, 16, 1, False)
    assert cost.generate_flops(cfg, 2, 16, 8, False) > cost.generate_flops(cfg, 2, 16, 8, True)


def test_workload_parameters():
    w = get_workload("transformer")
    p = w.parse({"model": "gpt2-tiny", "batch": 2, "seq_len": 32})
    assert w.cost(p).samples == 64 and not w.per_call_timing(p)
    g = w.parse({"model": "gpt2-tiny", "task": "generate", "prompt_len": 8, "new_tokens": 4})
    assert w.cost(g).samples == 4 and w.per_call_timing(g)
    for bad, msg in [({"model": "bert-tiny", "task": "generate", "prompt_len": 8, "new_tokens": 4}, "encoder"),
                     ({"model": "gpt2-tiny", "task": "generate", "prompt_len": 8}, "needs prompt_len and new_tokens"),
                     ({"model": "gpt2-tiny", "seq_len": 129}, "exceeds the context of 128"),
                     ({"model": "gpt2-tiny"}, "needs seq_len"),
                     ({"model": "gpt9", "seq_len": 8}, "unknown transformer")]:
        with pytest.raises(ValidationError, match=msg):
            w.parse(bad)


def test_task_settings_belong_to_their_task():
    """A case names only what it uses: the defaults of its own task are filled, another task's are refused."""
    w = get_workload("transformer")
    train = w.parse({"model": "gpt2-tiny", "seq_len": 8})
    assert (train.lr, train.weight_decay, train.kv_cache) == (1e-4, 0.01, None)
    gen = w.parse({"model": "gpt2-tiny", "task": "generate", "prompt_len": 4, "new_tokens": 2})
    assert (gen.kv_cache, gen.lr) == (True, None)
    assert set(gen.model_dump(exclude_none=True)) >= {"kv_cache"}
    assert "kv_cache" not in train.model_dump(exclude_none=True)
    with pytest.raises(ValidationError, match="kv_cache applies to task generate, not train"):
        w.parse({"model": "gpt2-tiny", "seq_len": 8, "kv_cache": False})
    with pytest.raises(ValidationError, match="lr applies to task train, not infer"):
        w.parse({"model": "gpt2-tiny", "task": "infer", "seq_len": 8, "lr": 0.1})
