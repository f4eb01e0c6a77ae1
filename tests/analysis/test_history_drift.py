"""History's gate allows for the machine's drift the canary saw (analysis.history.check_newest)."""

from __future__ import annotations

from datetime import UTC, datetime

from dlperf.analysis.changepoints import detect
from dlperf.analysis.history import Point, RunInfo, check_newest


def series(newest_s: float, canary_s: list[float | None]) -> tuple[list[Point], list[RunInfo]]:
    """Five baseline runs at 1 ms (interval +-1%) and a newest one at `newest_s`, with these canaries."""
    medians = [1e-3] * 5 + [newest_s]
    points = [Point(i, "ok", m, m * 0.99, m * 1.01, "valid", 3, True, None, c)
              for i, (m, c) in enumerate(zip(medians, canary_s, strict=True))]
    runs = [RunInfo(f"r{i}", i + 1, datetime(2026, 1, 1 + i, tzinfo=UTC), "complete", {}) for i in range(6)]
    return points, runs


def check(newest_s: float, canary_s: list[float | None]) -> str:
    points, runs = series(newest_s, canary_s)
    used = list(range(len(points)))
    detection = detect([p.median_s for p in points[:-1]] + [points[-1].median_s], [0.01] * 6, 0.05)
    return check_newest(points, runs, detection, used, 5.0, gate=True).verdict


def test_a_slowdown_the_canary_saw_too_does_not_fail_the_gate_and_a_larger_one_does() -> None:
    steady = [3e-3] * 6
    slow_machine = [3e-3] * 5 + [3.6e-3]  # the newest run's machine 20% slower by the canary
    assert check(1.2e-3, steady) == "slower"
    assert check(1.2e-3, slow_machine) == "inconclusive"  # the drift explains it
    assert check(1.5e-3, slow_machine) == "slower"  # 50% is beyond the 20% drift and the threshold
    assert check(1.2e-3, [None] * 6) == "slower"  # runs without a canary: checked as before
