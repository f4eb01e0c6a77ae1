"""Real LoadGen runs of about a second on a fake step: each scenario's stored dict agrees with LoadGen's summary,
an overloaded Server probe is INVALID for its latency, the search brackets the step's capacity, and a failing
predict ends the run with the error instead of hanging LoadGen."""

from __future__ import annotations

import re

import pytest

from dlperf.serving.driver import drive
from dlperf.serving.run import run_loadgen
from dlperf.serving.settings import loadgen_settings, shortened
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
    assert lg["shortened"] == shortened(params) and lg["shortened"][0] == "min duration 1 s (MLPerf 600 s)"
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
    elif scenario == "server":
        assert value == pytest.approx(float(_summary(text, "Completed samples per second")), abs=0.01)
        assert lg["effective"]["effective_target_qps"] == 100
    else:
        assert value == pytest.approx(float(_summary(text, "Samples per second")), rel=1e-4)
        assert any("offline expected rate" in n for n in lg["notes"])
    sut = metrics["sut"]
    assert sut["max_batch"] == 4 and sut["batches"] == sum(sut["batch_size_counts"].values()) > 0
    assert sut["predict_s_median"] >= PREDICT_S


def test_a_server_rate_above_capacity_is_invalid_for_its_latency():
    params = quick("server", max_batch=1, target_latency_ms=20.0)
    capacity = 1 / PREDICT_S  # one sample per 2 ms call, at best
    loadgen, sut = run_loadgen(sleeping_step().predict, 1, loadgen_settings(params, server_qps=2 * capacity),
                               sample_pool=64, shortened=shortened(params))
    _agrees_with_summary(loadgen)
    assert loadgen["validity"] == "INVALID"
    assert "latency constraint not met" in loadgen["invalid_reasons"]
    assert loadgen["results"]["result_perf_constraints_met"] is False
    assert sut["batch_size_counts"] == {"1": sut["batches"]}


def test_the_search_brackets_the_capacity_and_stores_every_probe():
    params = quick("server", max_batch=1, target_latency_ms=20.0, search_probes=6)
    metrics = drive(None, "cpu", params, sleeping_step(), None)
    search = metrics["server_search"]
    probes = search["probes"]
    assert 2 <= len(probes) <= 6 and search["target_latency_s"] == 0.02 and search["percentile"] == 0.99
    valid = [p["target_qps"] for p in probes if p["validity"] == "VALID"]
    invalid = [p["target_qps"] for p in probes if p["validity"] == "INVALID"]
    assert valid and invalid, probes
    best = search["best_qps"]
    assert best == max(valid) and any(r > best for r in invalid)
    assert best < 1 / PREDICT_S  # a 2 ms step cannot serve 500/s within its bound
    assert metrics["loadgen"]["validity"] == "VALID"
    assert metrics["loadgen"]["effective"]["effective_target_qps"] == pytest.approx(best, rel=1e-3)
    for p in probes:
        assert set(p) == {"target_qps", "validity", "completed_qps", "latency_p99_s", "invalid_reasons", "wall_s"}
        assert p["wall_s"] > 0 and (p["validity"] == "VALID") == (not p["invalid_reasons"])
    assert search["stopped"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scenario", ["single-stream", "multi-stream", "server", "offline"])
def test_a_failing_predict_ends_the_run_with_its_error(scenario):
    # the warm-up and speed calls pass (1 + 2 x 5 at most); LoadGen's run then fails on its 20th call or so
    params = quick(scenario, min_duration_s=30.0, target_qps=100.0 if scenario in ("server", "offline") else None)
    with pytest.raises(RuntimeError, match="deliberate predict failure"):
        drive(None, "cpu", params, sleeping_step(fail_after=30), None)
    # LoadGen is usable again afterwards
    assert drive(None, "cpu", quick("single-stream"), sleeping_step(), None)["loadgen"]["validity"] == "VALID"
