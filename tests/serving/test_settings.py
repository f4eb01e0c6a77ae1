"""LoadGen's settings from a serve case: MLPerf's rules as data, shortened labels, early stopping's floor."""

from __future__ import annotations

import mlperf_loadgen as lg
import pytest

from dlperf.serving import settings as lgs
from dlperf.serving.settings import EARLY_STOPPING_MIN_QUERIES, RULES, SEEDS, min_queries, server_max_async, shortened
from tests.serving.fakes import quick


def test_mlperf_rules_per_scenario():
    assert {s: r.min_duration_s for s, r in RULES.items()} == dict.fromkeys(RULES, 600.0)
    assert RULES["MultiStream"].min_query_count == 662 and RULES["Offline"].min_query_count == 24576
    assert RULES["SingleStream"].percentile == 0.90 and RULES["Server"].percentile == 0.99


def test_a_run_at_mlperfs_rules_is_not_shortened():
    assert shortened(quick("server", min_duration_s=600.0, min_query_count=None)) == []
    assert shortened(quick("multi-stream", min_duration_s=600.0, min_query_count=None)) == []


def test_shortened_says_what_is_below_the_rules():
    assert shortened(quick("single-stream", min_duration_s=3.0, min_query_count=None)) == [
        "min duration 3 s (MLPerf 600 s)"]
    assert shortened(quick("offline", min_duration_s=2.0, min_query_count=64)) == [
        "min duration 2 s (MLPerf 600 s)", "min samples 64 (MLPerf 24576)"]
    # a count under early stopping's floor is raised to it, and the label says what LoadGen got
    assert shortened(quick("single-stream", min_duration_s=600.0, min_query_count=10)) == [
        "min queries 64 (MLPerf 100)"]


def test_a_count_below_early_stoppings_floor_is_raised_and_said():
    count, note = min_queries(quick("server", min_query_count=100))
    assert count == EARLY_STOPPING_MIN_QUERIES["Server"] == 459
    assert note and "raised to 459" in note
    assert min_queries(quick("server", min_query_count=1000)) == (1000, None)
    assert min_queries(quick("offline", min_query_count=5)) == (5, None)  # Offline has no early stopping


def test_test_settings_per_scenario():
    ss = lgs.loadgen_settings(quick("single-stream"), expected_query_s=0.002)
    assert ss.scenario == lg.TestScenario.SingleStream and ss.mode == lg.TestMode.PerformanceOnly
    assert ss.min_duration_ms == 1000 and ss.min_query_count == 64
    assert ss.single_stream_expected_latency_ns == 2_000_000 and ss.single_stream_target_latency_percentile == 0.9
    assert ss.schedule_rng_seed == SEEDS["schedule_rng_seed"]
    sv = lgs.loadgen_settings(quick("server", target_latency_ms=50.0), server_qps=100.0)
    assert sv.server_target_qps == 100.0 and sv.server_target_latency_ns == 50_000_000
    assert sv.server_target_latency_percentile == 0.99
    assert sv.server_max_async_queries == server_max_async(100.0, 0.05) == 36
    ms = lgs.loadgen_settings(quick("multi-stream", samples_per_query=6, target_latency_ms=None), expected_query_s=0.01)
    assert ms.multi_stream_samples_per_query == 6 and ms.multi_stream_expected_latency_ns == 10_000_000
    off = lgs.loadgen_settings(quick("offline", target_qps=250.0))
    assert off.offline_expected_qps == 250.0
    with pytest.raises(ValueError, match="SingleStream expected latency"):
        lgs.loadgen_settings(quick("single-stream"))
