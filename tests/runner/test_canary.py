"""The canary: its arithmetic on a fake clock and recorded times, and the sweep storing it around each case."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dlperf.core.result import CaseResult, Metrics
from dlperf.report.noise import noise_lines
from dlperf.runner import canary as canary_mod
from dlperf.runner.canary import Canary, CanaryTime, local_times, run_series, stats
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.studies import load_study
from tests.conftest import STUDIES
from tests.factories import case

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClock:
    """Each call of a part lasts the next of `durations_s`: the clock returns start, start + d, next start, ..."""

    def __init__(self, durations_s: list[float]) -> None:
        self.ticks = []
        now = 100.0
        for d in durations_s:
            self.ticks += [now, now + d]
            now += d + 1.0
        self.ticks.reverse()

    def __call__(self) -> float:
        return self.ticks.pop()


def test_a_canary_is_the_median_of_each_part_on_a_fake_clock() -> None:
    memory = [0.004, 0.002, 0.009, 0.003, 0.002, 0.005, 0.003, 0.003, 0.004]
    compute = [0.001, 0.0011, 0.0009, 0.005, 0.001, 0.0012, 0.001, 0.0008, 0.001]
    assert len(memory) == len(compute) == canary_mod.REPEATS
    clock = FakeClock(memory + compute)
    c = Canary(clock=clock, now=lambda: T0).measure()
    assert c.memory_s == pytest.approx(statistics.median(memory)) and c.memory_s == pytest.approx(0.003)
    assert c.compute_s == pytest.approx(0.001)
    assert c.time_s == pytest.approx(0.004) and c.at == T0.isoformat() and c.kind == canary_mod.KIND
    assert clock.ticks == []  # every repeat of both parts was timed, nothing else


def series(times_ms: list[float], step_s: float = 5.0) -> list[CanaryTime]:
    return [CanaryTime((T0 + timedelta(seconds=i * step_s)).isoformat(), t / 1e3, 0.0) for i, t in enumerate(times_ms)]


def test_spread_and_drift_from_recorded_times() -> None:
    s = stats(series([10, 10, 10, 11, 12, 12]))
    assert s is not None and s.n == 6 and s.duration_s == 25
    assert s.median_s == pytest.approx(0.0105)
    assert s.spread_rel == pytest.approx(2 / 10.5)  # (max - min) / median
    assert s.drift_rel == pytest.approx(12 / 10 - 1)  # median of the last two over the first two
    assert s.unstable and "changed" in s.line()
    steady = stats(series([10, 10.2, 9.9, 10.1]))
    assert steady is not None and not steady.unstable and steady.drift_rel == pytest.approx(10.1 / 10 - 1)
    assert "steady" in steady.line()
    assert stats(series([10])) is None


def row(rep: int, before: CanaryTime | None, after: CanaryTime | None, validity: str = "valid",
        median_s: float = 1e-3) -> CaseResult:
    extra = {"canary": {"before": before.as_dict(), "after": after.as_dict()}} if before and after else {}
    return case("k", rep=rep, metrics=Metrics(median_s=median_s, validity=validity, **extra), at=T0)


def test_the_run_series_is_each_canary_once_in_time_order_and_old_runs_have_none() -> None:
    s = series([10, 11, 12])
    rows = [row(1, s[1], s[2]), row(0, s[0], s[1])]  # stored out of order; s[1] is in both
    assert run_series(rows) == s
    assert local_times(rows[:1]) == pytest.approx([0.011, 0.012])
    old = [row(0, None, None), row(1, None, None)]
    assert run_series(old) == [] and local_times(old) == []


def test_the_summary_says_plainly_when_the_machine_was_noisy() -> None:
    s = series([10, 14, 10, 15])
    lines = noise_lines([row(0, s[0], s[1], "noisy"), row(1, s[1], s[2]), row(2, s[2], s[3], "noisy")])
    assert lines[0].startswith("canary: 4 times over 15 s") and "spread 41.7%" in lines[0]  # 5 / 12
    assert "THIS MACHINE WAS NOISY" in lines[1] and "moved by 42%" in lines[1] and "2 of 3 cases were noisy" in lines[1]
    quiet = series([10, 10.1, 10, 10.1])
    assert [line.startswith("canary:") for line in noise_lines([row(0, quiet[0], quiet[1]),
                                                                row(1, quiet[2], quiet[3])])] == [True]
    assert noise_lines([row(0, None, None), row(1, None, None)]) == []  # an old run: no canary, nothing noisy


def test_the_sweep_times_the_canary_before_the_first_case_and_after_each_outside_its_worker(tmp_path: Path) -> None:
    path = STUDIES / "two_tiny_adds.yaml"
    store = Store(tmp_path / "c.sqlite")
    summary = run_study(load_study(str(path)), store, overrides={"threads": 1})
    rows = sorted(store.results(summary.run_id), key=lambda r: r.started_at)
    assert [r.status for r in rows] == ["ok", "ok"]
    canaries = [r.m.get("canary") for r in rows]
    assert canaries[0]["after"] == canaries[1]["before"]  # one canary between the two cases, not two
    assert len(run_series(rows)) == 3 and all(c.time_s > 0 for c in run_series(rows))
    for r, c in zip(rows, canaries, strict=True):  # never inside the case's worker (its timed region)
        assert datetime.fromisoformat(c["before"]["at"]) <= utc(r.started_at)
        assert datetime.fromisoformat(c["after"]["at"]) >= utc(r.finished_at)


def utc(t: datetime) -> datetime:
    """A stored time (SQLite gives it back without its zone; it was stored in UTC)."""
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def test_a_fleet_runs_canaries_are_taken_against_each_machines_median() -> None:
    """Two steady machines of different speeds: pooled they would look 100% unstable; each over its own median they
    are steady. The same instant on two machines is two canaries."""
    fast = [CanaryTime((T0 + timedelta(seconds=i)).isoformat(), t / 1e3, 0.0, host="fast")
            for i, t in enumerate([10, 10.1, 10, 10.1])]
    slow = [CanaryTime((T0 + timedelta(seconds=i)).isoformat(), t / 1e3, 0.0, host="slow")
            for i, t in enumerate([20, 20.2, 20, 20.2])]
    rows = [row(i, f, s) for i, (f, s) in enumerate(zip(fast, slow, strict=True))]
    assert len(run_series(rows)) == 8
    s = stats(fast + slow)
    assert s is not None and s.machines == 2 and not s.unstable
    assert s.spread_rel == pytest.approx((10.1 / 10.05 - 10 / 10.05) / 1.0, rel=0.02)
    assert "on 2 machines" in s.line() and "steady" in s.line()
    one = stats(fast + [CanaryTime(fast[-1].at, 0.013, 0.0, host="fast")])
    assert one is not None and one.machines == 1 and one.unstable  # one machine: raw times, as before
    assert CanaryTime.from_dict(fast[0].as_dict()) == fast[0] and "host" not in series([10])[0].as_dict()
