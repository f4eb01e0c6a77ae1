"""LoadGen's settings from a serve case: MLPerf's rules as data, shortened labels, early stopping's floor."""

from __future__ import annotations

import mlperf_loadgen as lg
import pytest

from dlperf.serving import settings as lgs
from dlperf.serving.early_stopping import server_queries_allowing
from dlperf.serving.settings import (
    EARLY_STOPPING_MIN_QUERIES,
    RULES,
    SEEDS,
    min_queries,
    server_max_async,
    server_probe_queries,
    shortened,
    shortened_effective,
)
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
    assert sv.server_max_async_queries == 0  # MLPerf's: no cap, unless a search probe asks for one
    probe = lgs.loadgen_settings(quick("server", target_latency_ms=50.0), server_qps=100.0, min_query_count=2010,
                                 max_async=server_max_async(100.0, 0.05))
    assert probe.server_max_async_queries == 36 and probe.min_query_count == 2010
    ms = lgs.loadgen_settings(quick("multi-stream", samples_per_query=6, target_latency_ms=None), expected_query_s=0.01)
    assert ms.multi_stream_samples_per_query == 6 and ms.multi_stream_expected_latency_ns == 10_000_000
    off = lgs.loadgen_settings(quick("offline", target_qps=250.0))
    assert off.offline_expected_qps == 250.0
    with pytest.raises(ValueError, match="SingleStream expected latency"):
        lgs.loadgen_settings(quick("single-stream"))


def test_early_stopping_counts_match_loadgens():
    # LoadGen's own figures: 459 queries with none late (Server p99), 662 with one (its MultiStream message)
    assert server_queries_allowing(0) == EARLY_STOPPING_MIN_QUERIES["Server"] == 459
    assert server_queries_allowing(1) == 662
    assert server_queries_allowing(10) == 2010  # about 0.5% late
    assert server_queries_allowing(0, percentile=0.90) == 44  # ceil(log 0.01 / log 0.9)


def test_a_server_probe_runs_enough_queries_to_let_some_be_late():
    assert server_probe_queries(quick("server", min_query_count=None)) == (2010, 10)
    count, late = server_probe_queries(quick("server", min_query_count=5000))
    assert count == 5000 and server_queries_allowing(late) <= 5000 < server_queries_allowing(late + 1)


def test_the_stored_labels_come_from_what_loadgen_ran():
    # Offline issued max(min, 1.1 x duration x rate) samples: 330, not the 64 asked for
    effective = {"effective_min_duration_ms": 1000, "effective_min_sample_count": 330, "effective_min_query_count": 1}
    assert shortened_effective("Offline", effective) == ["min duration 1 s (MLPerf 600 s)",
                                                         "min samples 330 (MLPerf 24576)"]
    assert shortened_effective("Offline", effective | {"effective_min_duration_ms": 600_000,
                                                       "effective_min_sample_count": 30000}) == []
    ms = {"effective_min_duration_ms": 600_000, "effective_min_query_count": 662, "effective_samples_per_query": 6}
    assert shortened_effective("MultiStream", ms) == ["samples per query 6 (MLPerf 8)"]
    sv = {"effective_min_duration_ms": 600_000, "effective_min_query_count": 2010, "effective_max_async_queries": 52}
    assert shortened_effective("Server", sv) == ["outstanding-query cap 52 (MLPerf: none)"]
    assert shortened_effective("Server", sv | {"effective_max_async_queries": 0}) == []
    assert shortened(quick("multi-stream", min_duration_s=600.0, min_query_count=None, samples_per_query=6)) == [
        "samples per query 6 (MLPerf 8)"]
