"""A served case's stored LoadGen summary and Server rate search read as typed objects: every field as stored, a
missing or mistyped key read as absent (never a figure from elsewhere), and the stored dict itself left as it was
(an export gives it back unchanged)."""

from __future__ import annotations

from dlperf.core.payloads import LoadgenMetric, LoadgenSummary, SearchProbe, ServerSearch
from dlperf.core.result import Metrics
from dlperf.core.status import SHORTENED
from dlperf.store.export import loadgen_cells

STORED = {"scenario": "Server", "validity": "INVALID", "invalid_reasons": ["min duration not met", 7],
          "metric": {"name": "scheduled samples/s", "value": 450, "unit": "samples/s"},
          "results": {"result_query_count": 1024, "result_99.00_percentile_latency_ns": 9_000_000},
          "effective": {"effective_target_qps": 450.0}, "loadgen_version": "6.0.17", "errors": [],
          "summary_text": "MLPerf Results Summary", "shortened": ["min_duration 1 s (MLPerf: 600 s)"]}


def test_every_stored_field_reads_as_stored() -> None:
    lg = Metrics(loadgen=STORED).loadgen_summary()
    assert lg == LoadgenSummary(
        scenario="Server", validity="INVALID", invalid_reasons=("min duration not met", "7"),
        metric=LoadgenMetric(name="scheduled samples/s", value=450, unit="samples/s"),
        results=STORED["results"], effective={"effective_target_qps": 450.0}, loadgen_version="6.0.17",
        shortened=("min_duration 1 s (MLPerf: 600 s)",), empty=False)
    assert isinstance(lg.metric.value, int)  # an int stays an int: the CSV writes 450, not 450.0
    assert loadgen_cells(lg) == ["INVALID", "scheduled samples/s", 450, "samples/s",
                                 f"{SHORTENED} (min_duration 1 s (MLPerf: 600 s))"]
    assert Metrics(loadgen=STORED).as_dict() == {"loadgen": STORED}  # stored as it was


def test_a_missing_or_mistyped_key_is_absent() -> None:
    assert Metrics().loadgen_summary() is None and LoadgenSummary.read("VALID") is None
    assert loadgen_cells(None) == [""] * 5
    empty = LoadgenSummary.read({})
    assert empty is not None and empty.empty and empty.validity is None and empty.shortened is None
    odd = LoadgenSummary.read({"validity": "VALID", "invalid_reasons": "not a list", "metric": {"value": "fast"},
                               "results": ["not", "a", "dict"], "effective": None, "shortened": None})
    assert odd is not None and not odd.empty
    assert odd.invalid_reasons == () and odd.results == {} and odd.effective == {}
    assert odd.metric == LoadgenMetric(name=None, value=None, unit=None)
    assert odd.shortened == ()  # stored (as nothing): MLPerf's own rules, unlike a row that predates the key
    assert loadgen_cells(odd) == ["VALID", "", "", "", "no"]
    assert (no_metric := LoadgenSummary.read({"metric": {}})) is not None and no_metric.metric is None


def test_a_server_search_reads_its_probes_and_best_rate_as_stored() -> None:
    raw = {"target_latency_s": 0.01, "percentile": 0.99, "best_qps": 400, "confirmed": False, "stopped": "bracketed",
           "probes": [{"target_qps": 400, "validity": "VALID", "invalid_reasons": [], "completed_qps": 399.5,
                       "latency_p99_s": 0.008, "wall_s": 61.0, "role": "probe"},
                      {"target_qps": 800.0, "validity": "INVALID", "invalid_reasons": ["p99 over the bound"]}]}
    s = Metrics(server_search=raw).server_search_summary()
    assert s == ServerSearch(probes=(SearchProbe(400.0, "VALID", (), 399.5, 0.008, 61.0),
                                     SearchProbe(800.0, "INVALID", ("p99 over the bound",), None, None, None)),
                             best_qps=400.0, target_latency_s=0.01, percentile=0.99, confirmed=False,
                             stopped="bracketed")
    assert Metrics(server_search=raw).as_dict() == {"server_search": raw}  # stored as it was


def test_a_search_with_a_missing_or_mistyped_key_reads_it_as_absent() -> None:
    assert Metrics().server_search_summary() is None and ServerSearch.read(["not", "a", "dict"]) is None
    s = ServerSearch.read({"probes": "none", "best_qps": "fast", "stopped": None})
    assert s == ServerSearch(probes=(), best_qps=None, target_latency_s=None, percentile=None, confirmed=True,
                             stopped=None)
    odd = ServerSearch.read({"probes": [7, {"target_qps": "x", "validity": None}]})
    assert odd is not None and odd.probes == (SearchProbe(), SearchProbe())  # counted, nothing read from them
