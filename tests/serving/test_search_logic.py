"""The Server search's rules on scripted verdicts (no LoadGen): a probe INVALID by early stopping alone is run again,
the chosen rate is confirmed by an uncapped run, flips are called non-monotonic, the time budget and the probe
limit stop it with their reasons, every run kept as a probe."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dlperf.serving.search import EARLY_STOPPING, search_server

pytestmark = pytest.mark.timeout(30)
BOUND_S = 0.02


def _run(validity: str, reasons: list[str], p99_s: float) -> dict:
    results = {"result_completed_samples_per_sec": 1.0, "result_99.00_percentile_latency_ns": int(p99_s * 1e9),
               "result_overlatency_query_count": 3, "result_query_count": 2010}
    return {"loadgen": {"validity": validity, "invalid_reasons": reasons, "results": results,
                        "activity": {"others_cores": 0.1}}, "probe": {"min_queries": 2010}}


def scripted(verdict: Callable[[float, bool, int], str]) -> tuple[Callable, list]:
    """run_probe whose verdict comes from verdict(qps, confirm, nth call at this rate); calls are recorded."""
    calls: list[tuple[float, bool]] = []

    def run(qps: float, confirm: bool) -> dict:
        nth = sum(1 for q, _ in calls if q == qps)
        calls.append((qps, confirm))
        v = verdict(qps, confirm, nth)
        if v == "VALID":
            return _run("VALID", [], 0.01)
        if v == "ES":  # early stopping alone, p99 under the bound
            return _run("INVALID", [EARLY_STOPPING], 0.015)
        return _run("INVALID", ["latency constraint not met", EARLY_STOPPING], 0.05)

    return run, calls


def test_capacity_is_bracketed_and_confirmed_without_the_cap():
    run, calls = scripted(lambda q, c, n: "VALID" if q <= 300 else "LATE")
    search, final = search_server(run, start_qps=100, max_probes=10, target_latency_s=BOUND_S, percentile=0.99)
    probes = search["probes"]
    assert [p["role"] for p in probes][-1] == "confirm" and calls[-1] == (search["best_qps"], True)
    assert all(not c for _, c in calls[:-1])  # every search probe ran with the cap
    assert 300 / 1.1 <= search["best_qps"] <= 300 and search["confirmed"] is True
    assert "bracketed" in search["stopped"] and "non-monotonic" not in search["stopped"]
    assert final is not None and final["loadgen"]["validity"] == "VALID"
    assert probes[0]["late_queries"] == 3 and probes[0]["min_queries"] == 2010 and probes[0]["activity"]


def test_an_early_stopping_only_probe_is_run_again_before_it_bounds_the_search():
    # 200/s fails early stopping once (a noisy machine), then passes: it must not become the upper bracket
    run, calls = scripted(lambda q, c, n: "ES" if q == 200 and n == 0 else ("VALID" if q <= 300 else "LATE"))
    search, _ = search_server(run, start_qps=100, max_probes=10, target_latency_s=BOUND_S, percentile=0.99)
    roles = [(p["target_qps"], p["role"], p["validity"]) for p in search["probes"]]
    assert (200, "search", "INVALID") in roles and (200, "re-probe", "VALID") in roles
    assert search["best_qps"] > 200 and "non-monotonic" in search["stopped"]


def test_a_latency_failure_is_not_run_again():
    run, calls = scripted(lambda q, c, n: "VALID" if q <= 300 else "LATE")
    search_server(run, start_qps=100, max_probes=10, target_latency_s=BOUND_S, percentile=0.99)
    rates = [q for q, c in calls if not c]
    assert len(rates) == len(set(rates))


def test_a_confirmation_that_flips_falls_back_to_the_next_valid_rate():
    # 282.8/s passes as a probe and fails its confirmation: the next lower VALID rate is confirmed instead
    run, calls = scripted(lambda q, c, n: "LATE" if q > 300 or (c and q > 250) else "VALID")
    search, final = search_server(run, start_qps=100, max_probes=12, target_latency_s=BOUND_S, percentile=0.99)
    confirms = [p for p in search["probes"] if p["role"] == "confirm"]
    assert len(confirms) >= 2 and confirms[0]["validity"] == "INVALID" and confirms[-1]["validity"] == "VALID"
    assert search["best_qps"] == confirms[-1]["target_qps"] <= 250
    assert "non-monotonic" in search["stopped"] and final["loadgen"]["validity"] == "VALID"


def test_the_probe_limit_while_doubling_says_best_is_a_lower_bound():
    run, _ = scripted(lambda q, c, n: "VALID")
    search, _ = search_server(run, start_qps=10, max_probes=4, target_latency_s=BOUND_S, percentile=0.99)
    assert search["best_qps"] == 40 and "lower bound" in search["stopped"]
    assert [p["role"] for p in search["probes"]] == ["search", "search", "search", "confirm"]


def test_the_time_budget_stops_the_search_and_keeps_its_probes():
    left = [100.0]

    def planned(qps: float, confirm: bool) -> float:
        return 2000 / qps  # the probe floor's queries at that rate

    def time_left() -> float:
        return left[0]

    def run_and_spend(qps: float, confirm: bool) -> dict:
        left[0] -= 2000 / qps
        return base(qps, confirm)

    base, calls = scripted(lambda q, c, n: "LATE")  # every rate INVALID: it halves, and each probe is longer
    search, final = search_server(run_and_spend, start_qps=100, max_probes=20, target_latency_s=BOUND_S,
                                  percentile=0.99, planned_s=planned, time_left_s=time_left)
    assert search["stopped"].startswith("time budget") and search["best_qps"] is None
    assert len(search["probes"]) == len(calls) >= 2 and left[0] >= 0 and final is not None
    # nothing fits at all: no run, and it says why
    search, final = search_server(base, start_qps=1, max_probes=5, target_latency_s=BOUND_S, percentile=0.99,
                                  planned_s=planned, time_left_s=lambda: 10.0)
    assert final is None and search["probes"] == [] and search["stopped"].startswith("time budget")
