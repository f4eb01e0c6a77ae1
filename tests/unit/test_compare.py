"""compare: ratio of medians and Mann-Whitney U on raw samples; equal distributions are 'within noise'."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from dlperf.core.result import CaseResult
from dlperf.report.compare import compare_measurements, compare_runs
from dlperf.timing import Measurement


def sample(scale: float, seed: int, n: int = 40) -> Measurement:
    rng = random.Random(seed)
    return Measurement(sample_times_s=tuple(scale * rng.lognormvariate(0, 0.05) for _ in range(n)),
                       sample_iters=(1,) * n)


def test_same_distribution_is_within_noise():
    ratio, p, verdict = compare_measurements(sample(1e-3, 1), sample(1e-3, 2))
    assert verdict == "within noise" and p >= 0.05 and abs(ratio - 1) < 0.05


def test_real_change_is_detected_in_both_directions():
    assert compare_measurements(sample(1e-3, 1), sample(1.2e-3, 2))[2] == "slower"
    assert compare_measurements(sample(1e-3, 1), sample(0.8e-3, 2))[2] == "faster"


def test_too_few_samples():
    few = Measurement(sample_times_s=(1.0, 1.1), sample_iters=(1, 1))
    assert compare_measurements(few, few)[2] == "too few samples"


def _row(key, status, m=None):
    now = datetime.now(UTC)
    return CaseResult(run_id="r", case_key=key, repetition=0, workload="ops", framework="numpy", device="cpu",
                      params={}, status=status, measurement=m.to_dict() if m else None, env_id=1, started_at=now,
                      finished_at=now)


def test_compare_runs_matches_cases_and_reports_gaps():
    a = [_row("x", "ok", sample(1e-3, 1)), _row("y", "ok", sample(1e-3, 3)), _row("only_a", "ok", sample(1, 4))]
    b = [_row("x", "ok", sample(2e-3, 2)), _row("y", "oom"), _row("only_b", "ok", sample(1, 5))]
    out = {c.case_key: c for c in compare_runs(a, b)}
    assert out["x"].verdict == "slower" and abs(out["x"].ratio - 2) < 0.1
    assert out["y"].verdict == "not comparable (ok vs oom)"
    assert out["only_a"].verdict == "only in run A" and out["only_b"].verdict == "only in run B"
