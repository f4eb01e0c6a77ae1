"""The precision-driven repetition policy: the interval arithmetic, the policy with a fake measure function, and a
sweep with --precision storing what it reached."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from scipy.stats import t as student_t

from dlperf.core.result import Metrics
from dlperf.runner.precision import (
    CaseState,
    PrecisionTarget,
    interval_rel,
    precision_text,
    reach_precision,
    usable_median,
)
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.studies import load_study
from tests.conftest import STUDIES
from tests.factories import case


def test_the_interval_is_students_t_on_log_medians() -> None:
    medians = [1.0e-3, 1.1e-3, 0.9e-3]
    logs = [math.log(m) for m in medians]
    half = student_t.ppf(0.975, 2) * statistics.stdev(logs) / math.sqrt(3)
    assert interval_rel(medians) == pytest.approx(math.expm1(half))
    assert interval_rel([2e-3, 2e-3]) == 0.0
    assert interval_rel([1e-3]) is None and interval_rel([]) is None and interval_rel([1e-3, 0.0]) is None


def scripted(values: list[float | None]):
    """A fake measure function: returns `values` in turn, recording each (key, repetition) it was asked for."""
    calls: list[tuple[str, int]] = []

    def run_more(key: str, repetition: int) -> float | None:
        calls.append((key, repetition))
        return values[len(calls) - 1]

    return run_more, calls


def test_the_policy_stops_as_soon_as_the_interval_is_narrow_enough() -> None:
    states = {"a": CaseState([1.0, 1.3], 2), "b": CaseState([1.0, 1.001, 0.999], 3)}  # b is already precise
    run_more, calls = scripted([1.15, 1.15, 1.15, 1.15, 1.15, 1.15])
    reached = reach_precision(states, run_more, PrecisionTarget(0.10, max_processes=20), budget_s=1e9)
    assert calls == [("a", 2), ("a", 3), ("a", 4), ("a", 5)]  # the next repetitions, of the wide case only
    five, six = [1.0, 1.3, 1.15, 1.15, 1.15], [1.0, 1.3, 1.15, 1.15, 1.15, 1.15]
    assert interval_rel(five) == pytest.approx(0.1222, abs=1e-4)  # still wider than 10% after five
    assert interval_rel(six) == pytest.approx(0.0911, abs=1e-4)
    assert reached["a"].stopped == "reached" and reached["a"].processes == 6
    assert reached["a"].precision_rel == pytest.approx(interval_rel(six))
    assert reached["b"].stopped == "reached" and reached["b"].processes == 3


def test_the_policy_stops_at_the_cap_and_counts_processes_that_did_not_count() -> None:
    states = {"a": CaseState([1.0], 1), "b": CaseState([], 1)}
    run_more, calls = scripted([2.0, None, 1.0, 1.5, 2.0, 1.5])
    reached = reach_precision(states, run_more, PrecisionTarget(0.01, max_processes=4), budget_s=1e9)
    assert calls == [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]  # rounds: a b a b a b
    assert reached["a"].stopped == "cap" and reached["a"].precision_rel == pytest.approx(interval_rel([1, 2, 1, 2]))
    assert states["a"].processes == states["b"].processes == 4
    assert states["a"].medians_s == [1.0, 2.0, 1.0, 2.0] and states["b"].medians_s == [1.5, 1.5]  # None: not counted
    # two medians that agree are no proof: b needed a third, and stopped at the cap with its interval of two
    assert reached["b"].stopped == "cap" and reached["b"].precision_rel == 0.0


def test_the_table_says_reached_only_where_the_policy_would_stop() -> None:
    """Two usable medians that agree are inside any target, yet the policy goes on (3 at least): the table says
    `cap` where it stopped there, never `reached`."""
    rows = [case("k", rep=i, metrics=Metrics(median_s=1.5e-3, precision={"target_rel": 0.05, "max_processes": 2}))
            for i in range(2)]
    assert precision_text(rows) == "±0.0% (target 5%: cap 2)"
    third = case("k", rep=2, metrics=Metrics(median_s=1.5e-3, precision={"target_rel": 0.05, "max_processes": 3}))
    assert precision_text([*rows, third]) == "±0.0% (target 5%: reached)"


def test_the_policy_stops_when_the_budget_is_spent() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def run_more(key: str, repetition: int) -> float:
        now[0] += 10.0  # each process takes 10 s
        return 1.0 + repetition % 2

    states = {"a": CaseState([1.0], 1)}
    reached = reach_precision(states, run_more, PrecisionTarget(0.01, max_processes=50), budget_s=25.0, clock=clock)
    assert reached["a"].stopped == "budget" and reached["a"].processes == 4  # 3 more: at 0, 10, 20 s; not at 30 s


def test_a_sweep_with_precision_adds_processes_and_stores_what_each_case_reached(tmp_path: Path) -> None:
    path = STUDIES / "two_tiny_adds.yaml"
    store = Store(tmp_path / "p.sqlite")
    target = 0.9
    summary = run_study(load_study(str(path)), store,
                        overrides={"threads": 1, "precision_rel": target, "max_processes": 3,
                                   "precision_budget_s": 600.0})
    rows = store.results(summary.run_id)
    by_case: dict[str, list] = {}
    for r in sorted(rows, key=lambda r: r.repetition):
        by_case.setdefault(r.case_key, []).append(r)
    assert len(by_case) == 2
    for key, case_rows in by_case.items():
        reps = [r.repetition for r in case_rows]
        assert reps == [0, 1, 2], (key, reps)  # a target is reached with 3 usable medians at least: the cap here
        assert [bool(r.m.get("precision").get("added")) for r in case_rows] == [False] + [True] * (len(reps) - 1)
        last = case_rows[-1].m.get("precision")
        medians = [m for m in (usable_median(r) for r in case_rows) if m is not None]
        assert last["processes"] == len(reps) and last["target_rel"] == target and last["max_processes"] == 3
        assert last["reached_rel"] == (pytest.approx(interval_rel(medians)) if len(medians) > 1 else None)
