"""Real LoadGen runs of about a second on a fake step: each scenario's stored dict agrees with LoadGen's summary,
an overloaded Server probe is INVALID for its latency, the search brackets the step's capacity, and a failing
predict ends the run with the error instead of hanging LoadGen."""

from __future__ import annotations

import re
import sys
import tempfile

import pytest

from dlperf.core.settings import RunSettings
from dlperf.serving.driver import drive
from dlperf.serving.run import run_loadgen
from dlperf.serving.settings import loadgen_settings, shortened, shortened_effective
from tests.serving.fakes import PREDICT_S, quick, sleeping_step

pytestmark = pytest.mark.timeout(120)


def _summary(text: str, label: str) -> str:
    found = re.search(rf"^{re.escape(label)}\s*:\s*(.+)$", text, re.MULTILINE)
    assert found, f"{label!r} not in LoadGen's summary"
    return found.group(1).strip()


def _agrees_with_summary(loadgen: dict) -> None:
    text = loadgen["summary_text"]
    assert _summary(text, "Scenario") == loadgen["scenario"]
    assert _summary(text, "Result is") == loadgen["validity"]
    for label, reason in (("Min duration satisfied", "min duration not met"),
                          ("Min queries satisfied", "min queries not met"),
                          ("Early stopping satisfied", "early stopping not met")):
        assert (_summary(text, f"  {label}") == "NO") == (reason in loadgen["invalid_reasons"]), label
    assert (loadgen["validity"] == "VALID") == (not loadgen["invalid_reasons"])
    assert loadgen["loadgen_version"].startswith("6.0.17")
    assert loadgen["effective"]["effective_min_duration_ms"] == 1000


@pytest.mark.parametrize("scenario", ["single-stream", "multi-stream", "server", "offline"])
def test_each_scenario_runs_and_its_dict_matches_loadgens_summary(scenario):
    params = quick(scenario, target_qps=100.0 if scenario == "server" else None)
    metrics = drive(None, "cpu", params, sleeping_step(), None)
    lg = metrics["loadgen"]
    _agrees_with_summary(lg)
    assert lg["shortened"] == shortened_effective(lg["scenario"], lg["effective"])
    assert lg["shortened"][0] == "min duration 1 s (MLPerf 600 s)"
    if scenario != "offline":  # Offline issues max(min, 1.1 x duration x rate) samples: more than asked
        assert lg["shortened"] == shortened(params)
    assert lg["activity"]["wall_s"] > 0 and "others_cores" in lg["activity"]  # this run's own window
    assert any("switch interval" in n for n in lg["notes"])
    value = lg["metric"]["value"]
    assert value is not None and value > 0
    text = lg["summary_text"]
    if scenario == "single-stream":
        assert lg["validity"] == "VALID", lg["summary_text"]
        estimate = re.search(r"Early stopping 90\.0th percentile estimate: (\d+)", text)
        assert estimate and value == int(estimate.group(1)) / 1e9 and value >= PREDICT_S
        assert metrics["samples_per_s"] == lg["results"]["result_qps_with_loadgen_overhead"]
    elif scenario == "multi-stream":
        assert lg["effective"]["effective_samples_per_query"] == 8
        assert metrics["sut"]["batch_size_counts"] == {"4": metrics["sut"]["batches"]}  # 8 samples: 2 x max_batch
        assert metrics["samples_per_s"] is None  # LoadGen reports no rate for MultiStream
        assert metrics["samples_per_s_reason"].startswith("MultiStream's metric is a latency per query")
    elif scenario == "server":
        assert value == pytest.approx(float(_summary(text, "Completed samples per second")), abs=0.01)
        assert lg["effective"]["effective_target_qps"] == 100
        assert lg["effective"]["effective_max_async_queries"] == 0  # a given rate: MLPerf's (no cap)
        assert not any("cap" in x for x in lg["shortened"])
    else:
        assert value == pytest.approx(float(_summary(text, "Samples per second")), rel=1e-4)
        assert any("offline expected rate" in n for n in lg["notes"])
        issued = lg["effective"]["effective_min_sample_count"]
        assert f"min samples {issued} (MLPerf 24576)" in lg["shortened"]
    if lg["validity"] == "INVALID":
        assert metrics["samples_per_s"] is None and metrics["samples_per_s_reason"].startswith("LoadGen: INVALID")
    sut = metrics["sut"]
    assert sut["max_batch"] == 4 and sut["batches"] == sum(sut["batch_size_counts"].values()) > 0
    assert sut["predict_s_median"] >= PREDICT_S


def test_a_server_rate_above_capacity_is_invalid_for_its_latency():
    params = quick("server", max_batch=1, target_latency_ms=20.0)
    capacity = 1 / PREDICT_S  # one sample per 2 ms call, at best
    loadgen, sut = run_loadgen(sleeping_step().predict, 1,
                               loadgen_settings(params, server_qps=2 * capacity, max_async=50), sample_pool=64)
    _agrees_with_summary(loadgen)
    assert loadgen["validity"] == "INVALID"
    assert "latency constraint not met" in loadgen["invalid_reasons"]
    assert loadgen["results"]["result_perf_constraints_met"] is False
    assert sut["batch_size_counts"] == {"1": sut["batches"]}
    assert "outstanding-query cap 50 (MLPerf: none)" in loadgen["shortened"]  # a cap is never silent


@pytest.mark.timeout(300)
def test_the_search_brackets_the_capacity_and_stores_every_probe():
    # a loose bound (100 ms) and 2010 queries a probe: a few late queries on this shared machine do not decide it.
    # 4 LoadGen runs (3 search probes, from half the capacity: VALID, then doubled: INVALID, then between; and
    # the confirming run): each probe lasts 2010 queries at its rate (~4-8 s), so 8 would take ~35 s
    params = quick("server", max_batch=1, target_latency_ms=100.0, search_probes=4)
    metrics = drive(None, "cpu", params, sleeping_step(), RunSettings(timeout_s=240))
    search = metrics["server_search"]
    probes = search["probes"]
    assert 2 <= len(probes) <= 4 and search["target_latency_s"] == 0.1 and search["percentile"] == 0.99
    valid = [p["target_qps"] for p in probes if p["validity"] == "VALID"]
    invalid = [p["target_qps"] for p in probes if p["validity"] == "INVALID"]
    assert valid and invalid, probes
    found = max(q for q in valid)  # the search's own bracket: its highest VALID rate, below an INVALID one
    assert any(r > found for r in invalid)
    assert found < 1 / PREDICT_S  # a 2 ms step cannot serve 500/s
    assert found > 0.2 / PREDICT_S, probes  # ... and serves 100/s within 100 ms even on a loaded machine
    for p in probes:
        assert {"target_qps", "validity", "completed_qps", "latency_p99_s", "invalid_reasons", "wall_s", "role",
                "min_queries", "late_queries_allowed", "max_async_queries", "late_queries", "activity"} <= set(p)
        assert p["wall_s"] > 0 and (p["validity"] == "VALID") == (not p["invalid_reasons"])
        assert p["min_queries"] == 2010 and p["late_queries_allowed"] == 10 and "others_cores" in p["activity"]
        assert (p["max_async_queries"] is None) == (p["role"] == "confirm")
    best = search["best_qps"]
    if best is None:  # every VALID rate's confirming run was INVALID (seen on a machine loaded enough to miss
        # 100 ms): a rate's latest verdict stands, none VALID is left, and the record says the verdicts flipped
        confirms = [p for p in probes if p["role"] == "confirm"]
        assert confirms and all(p["validity"] == "INVALID" for p in confirms), probes
        assert {p["target_qps"] for p in confirms} == set(valid) and not search["confirmed"]
        assert "non-monotonic" in search["stopped"], search["stopped"]
        return
    assert best in valid and any(r > best for r in invalid)
    final = metrics["loadgen"]
    assert final["effective"]["effective_target_qps"] == pytest.approx(best, rel=1e-3)
    if search["confirmed"]:  # the case's run is the confirming one: no cap, MLPerf's
        assert probes[-1]["role"] == "confirm" and final["validity"] == "VALID"
        assert final["effective"]["effective_max_async_queries"] == 0
        assert not any("cap" in x for x in final["shortened"])
    assert search["stopped"]


@pytest.mark.timeout(60)
def test_multistream_with_a_loose_target_latency_plans_with_the_measured_one():
    # target_latency_ms 30 is ~7x the 2 x 2 ms query: planned with it, LoadGen generates too few queries for 5 s
    params = quick("multi-stream", min_duration_s=5.0, target_latency_ms=30.0)
    lg = drive(None, "cpu", params, sleeping_step(), None)["loadgen"]
    assert "min duration not met" not in lg["invalid_reasons"], lg["summary_text"]
    assert any("planned with the measured query latency" in n for n in lg["notes"])
    assert lg["effective"]["effective_target_qps"] > 1 / 0.030  # LoadGen's planned rate: the measured latency's
    tight = quick("multi-stream", min_duration_s=1.0, target_latency_ms=1.0)  # under the measured: used as given
    lg = drive(None, "cpu", tight, sleeping_step(), None)["loadgen"]
    assert any("planned with target_latency_ms 1 ms" in n for n in lg["notes"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scenario", ["single-stream", "multi-stream", "server", "offline"])
def test_a_failing_predict_ends_the_run_with_its_error(scenario, tmp_path, monkeypatch):
    # the warm-up and speed calls pass (1 + 2 x 5 at most); LoadGen's run then fails on its 20th call or so.
    # Server issues on its schedule (no cap at a given rate): its run lasts its min duration, so a short one.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    switch_s = sys.getswitchinterval()
    params = quick(scenario, min_duration_s=3.0 if scenario == "server" else 30.0,
                   target_qps=100.0 if scenario in ("server", "offline") else None)
    with pytest.raises(RuntimeError, match="deliberate predict failure"):
        drive(None, "cpu", params, sleeping_step(fail_after=30), None)
    assert list(tmp_path.iterdir()) == []  # LoadGen's logs went with the error
    assert sys.getswitchinterval() == switch_s
    # LoadGen is usable again afterwards
    assert drive(None, "cpu", quick("single-stream"), sleeping_step(), None)["loadgen"]["validity"] == "VALID"
