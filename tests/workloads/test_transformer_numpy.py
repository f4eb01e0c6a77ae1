"""The float32 NumPy transformer against the float64 reference: logits, greedy generation with and without the
KV cache, the builder's steps and their phases, and its refusals (train, mixed precision)."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.models.transformer import get_config, init_weights, make_tokens, reference
from dlperf.models.transformer import numpy_model as nm
from dlperf.workloads import get_workload

W = get_workload("transformer")
#: float32 against float64 on tiny models: logits of size ~0.1-1 agree to ~1e-6; this leaves room for BLAS order.
RTOL, ATOL = 1e-4, 1e-5


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-tiny"])
def test_logits_match_the_reference(name):
    cfg = get_config(name, max_positions=64)
    weights = init_weights(cfg, 3)
    tokens = make_tokens(cfg, 2, 17, seed=5)
    model = nm.build(cfg, weights)
    got = nm.logits(model, tokens)
    assert got.dtype == np.float32
    want = reference.forward(cfg, weights, tokens)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(nm.to_weights(model)["h0.attn_qkv_w"], weights["h0.attn_qkv_w"])


@pytest.mark.parametrize("kv_cache", [True, False])
def test_generation_matches_the_reference(kv_cache):
    cfg = get_config("gpt2-tiny")
    weights = init_weights(cfg, 1)
    prompt = make_tokens(cfg, 3, 9, seed=2)
    got = nm.generate(nm.build(cfg, weights), prompt, 12, kv_cache=kv_cache)
    assert got.dtype == np.int64 and got.shape == (3, 12)
    np.testing.assert_array_equal(got, reference.generate(cfg, weights, prompt, 12))


def test_the_cache_changes_the_work_not_the_tokens():
    cfg = get_config("gpt2-tiny", n_layer=3)
    model = nm.build(cfg, init_weights(cfg, 7))
    prompt = make_tokens(cfg, 2, 30, seed=8)
    with_cache = nm.generate(model, prompt, 40, kv_cache=True)
    np.testing.assert_array_equal(with_cache, nm.generate(model, prompt, 40, kv_cache=False))
    # ... and a prompt of one token, a single new token
    np.testing.assert_array_equal(nm.generate(model, prompt[:, :1], 1, kv_cache=True),
                                  nm.generate(model, prompt[:, :1], 1, kv_cache=False))


def test_infer_step_returns_logits():
    fw = get_framework("numpy")
    p = W.parse({"model": "gpt2-tiny", "task": "infer", "batch": 2, "seq_len": 16})
    step = W.build(fw, "cpu", p)
    assert step.call_phases is None
    step.fn()
    cfg = p.config()
    want = reference.forward(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 16))
    np.testing.assert_allclose(step.result(), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kv_cache", [True, False])
def test_generate_step_records_one_phase_per_call(kv_cache):
    fw = get_framework("numpy")
    p = W.parse({"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 8, "new_tokens": 6,
                 "kv_cache": kv_cache})
    step = W.build(fw, "cpu", p)
    for _ in range(3):
        step.fn()
    phases = step.call_phases()
    assert len(phases) == 3 and all(set(ph) == {"ttft_s", "decode_s"} for ph in phases)
    assert all(ph["ttft_s"] > 0 and ph["decode_s"] > 0 for ph in phases)
    cfg = p.config()
    want = reference.generate(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 8), 6)
    np.testing.assert_array_equal(step.result(), want.astype(np.float64))
    assert W.per_call_timing(p)


def test_train_and_mixed_precision_are_unsupported_with_the_reason():
    fw = get_framework("numpy")
    with pytest.raises(UnsupportedError, match="NumPy has no automatic differentiation"):
        W.build(fw, "cpu", W.parse({"model": "gpt2-tiny", "task": "train", "seq_len": 8}))
    with pytest.raises(UnsupportedError, match="float32 only"):
        W.build(fw, "cpu", W.parse({"model": "gpt2-tiny", "task": "infer", "seq_len": 8, "precision": "bf16"}))


def test_study_end_to_end_prints_tokens_per_s_mfu_ttft_and_tpot(tmp_path):
    """A real run through the worker: generation is timed per call (>= 100 single calls), its phases stored raw
    and mapped one per sample, and the report prints the throughput, MFU, TTFT/TPOT and KV-cache tables."""
    import json
    import sqlite3

    from tests.conftest import STUDIES, run_cli

    db = tmp_path / "r.sqlite"
    res = run_cli("run", str(STUDIES / "transformer_tiny.yaml"), db=db, timeout=400)
    assert res.returncode == 0, res.stderr
    for text in ("tokens/s and MFU", "MFU peak:", "time to first token per call", "TPOT p99",
                 "the KV cache's effect", "numpy: 1 transformer case(s) unsupported (NumPy has no automatic"):
        assert text in res.stdout, text
    rows = [(json.loads(p), json.loads(m or "null"), json.loads(ms or "null"), s) for p, m, ms, s in
            sqlite3.connect(db).execute("select params, metrics, measurement, status from results")]
    gens = [(m, ms) for p, m, ms, s in rows if p["task"] == "generate"]
    assert len(gens) == 2
    for m, ms in gens:
        # at least 100 single calls, unless the budget ran out first (a loaded machine), then at least 6
        floor = 6 if ms["stop_reason"] == "budget" else 100
        assert ms["per_call"] and set(ms["sample_iters"]) == {1} and len(ms["sample_times_s"]) >= floor
        assert len(m["call_phases"]) == len(ms["sample_times_s"])
        for ph, t in zip(m["call_phases"], ms["sample_times_s"], strict=True):
            assert ph["ttft_s"] + ph["decode_s"] <= t  # the phases lie inside the timed call
        assert m["ttft_p50_s"] > 0 and m["first_call_ttft_s"] > 0
        assert m["tpot_p90_ci95_low_s"] is not None or len(ms["sample_times_s"]) < 36  # p90's interval needs 36
    infer = [m for p, m, ms, s in rows if p["task"] == "infer"]
    assert all(m["per_call"] is False and m["samples_per_s"] > 0 for m in infer)


def test_quick_study_grid():
    from dlperf.studies import load_study

    quick = load_study("transformer", quick=True)
    assert {c.framework for c in quick.cases} == {"torch", "tensorflow", "jax", "numpy"}
    assert {c.device for c in quick.cases} == {"cpu"}
    numpy_tasks = sorted(c.params["task"] for c in quick.cases if c.framework == "numpy")
    assert numpy_tasks == ["generate", "generate", "infer"]
    caches = {c.params["kv_cache"] for c in quick.cases if c.params["task"] == "generate"}
    assert caches == {True, False}
    full = load_study("transformer")
    cuda = [c for c in full.cases if c.device == "cuda"]
    assert {c.params["model"] for c in cuda} == {"gpt2-small", "bert-base"}
    assert {c.params["precision"] for c in cuda if c.params["task"] == "train"} == {"bf16", "fp32"}
    assert not any(c.framework == "numpy" and c.device == "cuda" for c in full.cases)


def test_the_kv_cache_is_allocated_once_per_case_and_reused(monkeypatch):
    """As torch's builder does: the step makes its cache when built, and every call writes into the same arrays."""
    calls: list[object] = []
    made = []
    real_new, real_generate = nm.new_cache, nm.generate
    monkeypatch.setattr(nm, "new_cache", lambda *a: made.append(real_new(*a)) or made[-1])
    monkeypatch.setattr(nm, "generate", lambda *a, **kw: calls.append(kw.get("cache")) or real_generate(*a, **kw))
    p = W.parse({"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 8, "new_tokens": 6})
    step = W.build(get_framework("numpy"), "cpu", p)
    assert len(made) == 1  # before any timed call
    for _ in range(3):
        step.fn()
    assert len(made) == 1 and len(calls) == 3 and all(c is made[0] for c in calls)
    cfg = p.config()
    np.testing.assert_array_equal(step.result(), reference.generate(cfg, init_weights(cfg, 0),
                                                                    make_tokens(cfg, 2, 8), 6))


def test_a_reused_cache_gives_each_prompts_own_tokens():
    cfg = get_config("gpt2-tiny")
    weights = init_weights(cfg, 0)
    model = nm.build(cfg, weights)
    cache = nm.new_cache(cfg, 2, 8, 6)
    for seed in (1, 2, 1):
        prompt = make_tokens(cfg, 2, 8, seed=seed)
        np.testing.assert_array_equal(nm.generate(model, prompt, 6, kv_cache=True, cache=cache),
                                      reference.generate(cfg, weights, prompt, 6))
    with pytest.raises(ValueError, match="the cache holds"):
        nm.generate(model, prompt, 7, kv_cache=True, cache=cache)
