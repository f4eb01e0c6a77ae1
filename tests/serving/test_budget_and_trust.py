"""A serve case against its time budget (the worker's time-out), a step too slow for any Server rate, the threads a
driven case is judged with, and how the run table shows a served case (LoadGen's verdict beside dlperf's)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from dlperf.core.result import CaseResult
from dlperf.core.settings import RunSettings
from dlperf.core.validity import assess_activity
from dlperf.errors import ConfigError
from dlperf.report.tables import result_rows, validity_line
from dlperf.serving.driver import drive
from dlperf.units import MISSING
from tests.serving.fakes import quick, sleeping_step

pytestmark = pytest.mark.timeout(60)


def test_a_single_run_that_cannot_fit_says_to_raise_the_timeout():
    t0 = time.perf_counter()
    params = quick("single-stream", min_duration_s=600.0)
    with pytest.raises(ConfigError, match="raise the study's timeout_s"):
        drive(None, "cpu", params, sleeping_step(), RunSettings(timeout_s=600))
    assert time.perf_counter() - t0 < 30  # refused before LoadGen started


def test_a_search_without_time_for_a_probe_stops_and_says_so():
    params = quick("server", max_batch=1, target_latency_ms=100.0)
    m = drive(None, "cpu", params, sleeping_step(), RunSettings(timeout_s=16))  # 1 s left after the margin
    search = m["server_search"]
    assert search["probes"] == [] and search["best_qps"] is None and search["stopped"].startswith("time budget")
    assert "loadgen" not in m and m["samples_per_s"] is None and "time budget" in m["samples_per_s_reason"]


def test_a_step_slower_than_the_bound_is_not_searched():
    params = quick("server", max_batch=1, target_latency_ms=20.0)
    t0 = time.perf_counter()
    m = drive(None, "cpu", params, sleeping_step(predict_s=0.05), None)
    assert time.perf_counter() - t0 < 20
    search = m["server_search"]
    assert search["probes"] == [] and search["best_qps"] is None
    assert search["stopped"].startswith("no rate can be VALID") and "20 ms bound" in search["stopped"]


def _activity(others: float, own: float) -> dict:
    return {"cores": 2, "windows": {"during": {"wall_s": 5.0, "others_cores": others, "own_cores": own,
                                              "steal_frac": 0.0}}}


def test_a_driven_case_is_judged_with_the_cores_it_used():
    # 2 threads set, but the served case used 0.4 core: a 0.3-core neighbour does not oversubscribe 2 cores
    assert assess_activity(_activity(0.3, 0.4), threads=2, device="cpu")[0] == "valid"
    # a case that kept both cores busy is contended by the same neighbour
    assert assess_activity(_activity(0.3, 1.9), threads=2, device="cpu")[0] == "contended"
    assert assess_activity(_activity(0.6, 0.4), threads=2, device="cpu")[0] == "contended"


def _served(validity: str, rate: float | None) -> CaseResult:
    metrics = {"validity": "valid", "validity_reason": None, "samples_per_s": rate,
               "loadgen": {"scenario": "SingleStream", "validity": validity,
                           "invalid_reasons": [] if validity == "VALID" else ["early stopping not met"],
                           "results": {"result_query_count": 812}}}
    if rate is None:
        metrics["samples_per_s_reason"] = "LoadGen: INVALID (early stopping not met)"
    now = datetime.now(UTC)
    return CaseResult.model_validate({"run_id": "r", "case_key": "serve/x", "repetition": 0, "workload": "serve",
                                      "framework": "numpy", "device": "cpu", "params": {"scenario": "single-stream"},
                                      "env_id": 1, "wall_s": 2.0, "started_at": now, "finished_at": now,
                                      "status": "ok", "measurement": None, "metrics": metrics})


def test_the_run_table_shows_loadgens_verdict_beside_dlperfs():
    invalid, ok = result_rows([_served("INVALID", None), _served("VALID", 300.0)])
    assert invalid["validity"] == "valid, LoadGen INVALID" and invalid["samples/s"] == MISSING
    assert invalid["n"] == "812 queries" and "None" not in invalid["n"]
    assert ok["validity"] == "valid, LoadGen VALID" and ok["samples/s"] != invalid["samples/s"]
    line = validity_line([_served("INVALID", None), _served("VALID", 300.0)])
    assert "LoadGen's verdict on the run: 1 INVALID, 1 VALID" in line
