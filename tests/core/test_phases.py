"""Phases inside each call: mapped to the timer's calls, generation's TTFT/TPOT computed on load (never from disk)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import numpy as np
import pytest

from dlperf.core.phases import GENERATION_KEYS, generation_metrics, split_calls
from dlperf.core.result import CaseResult
from dlperf.timing import Measurement, measure


def test_split_calls_keeps_the_first_apart_and_the_timed_calls_last():
    phases = [{"ttft_s": float(i)} for i in range(1 + 3 + 5)]
    out = split_calls(phases, warmup_calls=3, timed_calls=5)
    assert out["first_call_phases"] == {"ttft_s": 0.0}
    assert [p["ttft_s"] for p in out["call_phases"]] == [4.0, 5.0, 6.0, 7.0, 8.0]
    wrong = split_calls(phases, warmup_calls=2, timed_calls=5)
    assert set(wrong) == {"call_phases_error"} and "9 calls" in wrong["call_phases_error"]


def test_timer_calls_map_one_phase_per_sample_in_per_call_mode(fake_clock):
    """A step recording its own phases under the real timer: phase i of the timed calls is sample i."""
    rng = random.Random(2)
    recorded: list[dict[str, float]] = []

    def fn():
        t = rng.uniform(1e-3, 3e-3)
        fake_clock.advance(t)
        recorded.append({"ttft_s": t / 4, "decode_s": 3 * t / 4})

    m = measure(fn, clock=fake_clock, warmup=3, per_call=True, min_samples=150, max_samples=150, min_run_time_s=0)
    out = split_calls(recorded, m.warmup_iters, m.total_iters)
    assert len(out["call_phases"]) == m.n_samples == 150
    for p, t in zip(out["call_phases"], m.times_s, strict=True):
        assert p["ttft_s"] + p["decode_s"] == pytest.approx(t, rel=1e-9)
    assert out["first_call_phases"] == recorded[0]


def test_generation_metrics_against_numpy():
    rng = np.random.default_rng(4)
    ttft = rng.lognormal(-5, 0.3, 200)
    decode = rng.lognormal(-3, 0.2, 200)
    calls = [{"ttft_s": float(a), "decode_s": float(b)} for a, b in zip(ttft, decode, strict=True)]
    g = generation_metrics({"ttft_s": 1.0, "decode_s": 2.0}, calls, batch=4, new_tokens=9)
    assert set(g) == set(GENERATION_KEYS)
    for q in (50, 90, 99):
        assert g[f"ttft_p{q}_s"] == pytest.approx(np.percentile(ttft, q), rel=1e-12)
        assert g[f"tpot_p{q}_s"] == pytest.approx(np.percentile(decode / 8, q), rel=1e-12)
    assert g["ttft_p99_ci95_low_s"] is None  # 200 calls are too few for p99's 95% interval
    assert g["tpot_p90_ci95_low_s"] <= g["tpot_p90_s"] <= g["tpot_p90_ci95_high_s"]
    assert g["ttft_max_s"] == ttft.max() and g["ttft_mean_s"] == pytest.approx(ttft.mean(), rel=1e-12)
    assert g["decode_tokens_per_s"] == pytest.approx(np.median(4 * 8 / decode), rel=1e-12)
    assert g["decode_tokens_per_s_ci95_low"] <= g["decode_tokens_per_s"] <= g["decode_tokens_per_s_ci95_high"]
    assert g["first_call_ttft_s"] == 1.0 and g["first_call_tpot_s"] == 0.25
    one = generation_metrics(None, calls, batch=1, new_tokens=1)
    assert one["tpot_p50_s"] is None and "no decode step" in one["tpot_reason"] and one["ttft_p50_s"] is not None
    assert generation_metrics(None, [{"step_s": 1.0}], batch=1, new_tokens=4) == {}


def test_from_row_recomputes_tails_and_generation_figures_from_raw_data():
    rng = random.Random(9)
    times = tuple(rng.uniform(0.01, 0.02) for _ in range(120))
    m = Measurement(sample_times_s=times, sample_iters=(1,) * 120, per_call=True)
    calls = [{"ttft_s": t / 3, "decode_s": 2 * t / 3} for t in times]
    now = datetime.now(UTC)
    stored = m.summary() | {"call_phases": calls, "first_call_phases": {"ttft_s": 0.5, "decode_s": 1.0},
                            "p90_s": 999.0, "ttft_p50_s": 999.0, "decode_tokens_per_s": -1.0}  # tampered on disk
    row = {"run_id": "r", "case_key": "k", "repetition": 0, "workload": "transformer", "framework": "numpy",
           "device": "cpu", "params": {"batch": 2, "new_tokens": 5}, "status": "ok", "measurement": m.to_dict(),
           "metrics": stored, "env_id": 1, "started_at": now, "finished_at": now}
    r = CaseResult.from_row(row)
    assert r.m.p90_s == pytest.approx(np.percentile(times, 90), rel=1e-12)
    assert r.m.ttft_p50_s == pytest.approx(np.percentile(times, 50) / 3, rel=1e-9)
    assert r.m.decode_tokens_per_s == pytest.approx(np.median([2 * 4 / (2 * t / 3) for t in times]), rel=1e-9)
    assert r.m.first_call_ttft_s == 0.5 and r.m.first_call_tpot_s == 0.25
