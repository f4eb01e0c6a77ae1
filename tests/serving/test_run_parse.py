"""LoadGen's detail log read without a run: its error lines, the metric where early stopping failed, and no
samples/s for an INVALID run (with the reason)."""

from __future__ import annotations

import json

from dlperf.serving.run import loadgen_dict, parse_detail, samples_per_s


def _line(key: str, value, error: bool = False) -> str:
    meta = {"is_error": True} if error else {"is_error": False}
    return ":::MLLOG " + json.dumps({"key": key, "value": value, "time_ms": 1.0, "namespace": "mlperf::logging",
                                     "event_type": "POINT_IN_TIME", "metadata": meta})


def _detail(scenario: str, validity: str, **values) -> str:
    lines = [_line("loadgen_version", "6.0.17 @ x"), _line("effective_scenario", scenario),
             _line("effective_min_duration_ms", 1000), _line("effective_min_query_count", 64),
             _line("result_validity", validity)]
    lines += [_line(k, v) for k, v in values.items()]
    return "\n".join(["not an MLLOG line", ":::MLLOG {broken json", *lines])


def test_parse_detail_keeps_error_lines():
    text = "\n".join([_line("error_runtime", "Too many outstanding queries issued: 60", error=True),
                      _line("result_validity", "INVALID"), _line("result_validity", "VALID")])
    values, errors = parse_detail(text)
    assert values["result_validity"] == "VALID"  # the last of a repeated key
    assert errors == ["error_runtime: Too many outstanding queries issued: 60"]
    lg = loadgen_dict(_detail("Server", "INVALID", result_min_duration_met=False) + "\n"
                      + _line("error_runtime", "Too many outstanding queries issued: 60", error=True), "")
    assert lg["errors"] and lg["invalid_reasons"] == ["min duration not met", "too many outstanding queries "
                                                      "(LoadGen ended the run early)"]


def test_the_metric_falls_back_to_the_percentile_when_early_stopping_fails():
    text = _detail("SingleStream", "INVALID", early_stopping_met=False, early_stopping_latency_ss=0,
                   **{"result_90.00_percentile_latency_ns": 3_000_000, "result_qps_with_loadgen_overhead": 300.0})
    lg = loadgen_dict(text, "summary")
    assert lg["metric"] == {"name": "p90 latency (LoadGen's percentile; early stopping not met)", "value": 0.003,
                            "unit": "s"}
    assert lg["invalid_reasons"] == ["early stopping not met"]
    ms = loadgen_dict(_detail("MultiStream", "INVALID", early_stopping_met=False,
                              **{"result_99.00_percentile_per_query_latency_ns": 8_000_000}), "")
    assert ms["metric"]["value"] == 0.008 and "early stopping not met" in ms["metric"]["name"]


def test_an_invalid_run_has_no_samples_per_s():
    text = _detail("SingleStream", "INVALID", early_stopping_met=False, result_qps_with_loadgen_overhead=300.0)
    assert samples_per_s(loadgen_dict(text, "")) == (None, "LoadGen: INVALID (early stopping not met)")
    ok = _detail("SingleStream", "VALID", early_stopping_met=True, result_qps_with_loadgen_overhead=300.0)
    assert samples_per_s(loadgen_dict(ok, "")) == (300.0, None)
    ms = _detail("MultiStream", "VALID", early_stopping_met=True)
    value, why = samples_per_s(loadgen_dict(ms, ""))
    assert value is None and why.startswith("MultiStream's metric is a latency per query")
