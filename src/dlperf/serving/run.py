"""One LoadGen run of a step, and LoadGen's verdict read from its own logs (the stored `metrics["loadgen"]`).

LoadGen writes `mlperf_log_summary.txt` (kept verbatim) and `mlperf_log_detail.txt`, whose `:::MLLOG {json}`
lines carry every figure under a key; the stored dict takes its figures from those lines only, never from the
summary's text. The metric per scenario is the one MLCommons' submission checker reads (RESULT_FIELD_NEW for
v6.0): SingleStream `early_stopping_latency_ss`, MultiStream `early_stopping_latency_ms`, Server
`result_completed_samples_per_sec`, Offline `result_samples_per_second`. Where early stopping did not pass,
LoadGen logs no estimate (0): the metric is then its plain percentile and its name says so.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from dlperf.core.scratch import scratch_dir
from dlperf.serving.records import LoadgenRecord, LogValue, MetricRecord, SutStats
from dlperf.serving.settings import log_settings, shortened_effective
from dlperf.serving.sut import ServingSUT

MLLOG = ":::MLLOG "
#: LoadGen's *_met flags and the reason each false one gives.
MET_FLAGS = {
    "result_perf_constraints_met": "latency constraint not met",
    "result_min_duration_met": "min duration not met",
    "result_min_queries_met": "min queries not met",
    "early_stopping_met": "early stopping not met",
}
#: LoadGen's runtime error when a Server run passed `server_max_async_queries`.
TOO_MANY_OUTSTANDING = "Too many outstanding queries"
#: Python's thread switch interval while LoadGen runs (s): LoadGen's issue callback needs the GIL, and with the
#: default 5 ms a Python-heavy predict on the SUT's thread could hold an issue back by up to that much.
SWITCH_INTERVAL_S = 1e-4


def parse_detail(text: str) -> tuple[dict[str, LogValue], list[str]]:
    """({key: value} of the detail log's MLLOG lines (the last one of a repeated key), LoadGen's error messages)."""
    values: dict[str, LogValue] = {}
    errors: list[str] = []
    for line in text.splitlines():
        if not line.startswith(MLLOG):
            continue
        try:
            entry = json.loads(line[len(MLLOG):])
        except json.JSONDecodeError:
            continue
        key, value = entry.get("key"), entry.get("value")
        if key is None:
            continue
        values[key] = value
        if (entry.get("metadata") or {}).get("is_error"):
            errors.append(f"{key}: {value}")
    return values, errors


def _ns_to_s(value: Any) -> float | None:
    return float(value) / 1e9 if isinstance(value, int | float) and value > 0 else None


def _metric(scenario: str, v: dict[str, LogValue]) -> MetricRecord:
    """The scenario's MLPerf metric as LoadGen reports it."""
    early = bool(v.get("early_stopping_met"))
    if scenario == "SingleStream":
        value = _ns_to_s(v.get("early_stopping_latency_ss")) if early else None
        if value is not None:
            return {"name": "p90 latency (early-stopping estimate)", "value": value, "unit": "s"}
        return {"name": "p90 latency (LoadGen's percentile; early stopping not met)",
                "value": _ns_to_s(v.get("result_90.00_percentile_latency_ns")), "unit": "s"}
    if scenario == "MultiStream":
        value = _ns_to_s(v.get("early_stopping_latency_ms")) if early else None
        if value is not None:
            return {"name": "p99 latency per query (early-stopping estimate)", "value": value, "unit": "s"}
        return {"name": "p99 latency per query (LoadGen's percentile; early stopping not met)",
                "value": _ns_to_s(v.get("result_99.00_percentile_per_query_latency_ns")), "unit": "s"}
    key = "result_completed_samples_per_sec" if scenario == "Server" else "result_samples_per_second"
    rate = v.get(key)
    name = "completed samples/s at the offered rate" if scenario == "Server" else "samples/s"
    return {"name": name, "value": float(rate) if isinstance(rate, int | float) else None, "unit": "samples/s"}


def samples_per_s(loadgen: LoadgenRecord) -> tuple[float | None, str | None]:
    """(the scenario's achieved samples/s where LoadGen reports one for a VALID run, else None; why None)."""
    if loadgen["validity"] != "VALID":
        return None, f"LoadGen: {loadgen['validity']} ({'; '.join(loadgen['invalid_reasons']) or 'no reason logged'})"
    if loadgen["scenario"] == "MultiStream":
        return None, "MultiStream's metric is a latency per query (LoadGen reports no samples/s for it)"
    key = {"SingleStream": "result_qps_with_loadgen_overhead", "Server": "result_completed_samples_per_sec",
           "Offline": "result_samples_per_second"}[loadgen["scenario"]]
    value = loadgen["results"].get(key)
    if isinstance(value, int | float):
        return float(value), None
    return None, f"LoadGen logged no {key}"


def loadgen_dict(detail_text: str, summary_text: str) -> LoadgenRecord:
    """The stored `metrics["loadgen"]` from LoadGen's two logs."""
    v, errors = parse_detail(detail_text)
    logged = v.get("effective_scenario") or v.get("requested_scenario")
    if logged is None or "result_validity" not in v:
        raise RuntimeError("LoadGen's detail log has no result (the run did not finish)")
    scenario = cast(str, logged)  # LoadGen logs its scenario's name, and its verdict below, as strings
    effective = {k: x for k, x in v.items() if k.startswith("effective_")}
    reasons = [why for flag, why in MET_FLAGS.items() if v.get(flag) is False]
    if any(TOO_MANY_OUTSTANDING in e for e in errors):
        reasons.append("too many outstanding queries (LoadGen ended the run early)")
    return {
        "scenario": scenario,
        "validity": cast(str, v["result_validity"]),
        "invalid_reasons": reasons,
        "metric": _metric(scenario, v),
        "results": {k: x for k, x in v.items() if k.startswith(("result_", "early_stopping_"))},
        "effective": effective,
        "loadgen_version": str(v.get("loadgen_version", "")),
        "errors": errors,
        "summary_text": summary_text,
        "shortened": shortened_effective(scenario, effective),
    }


def run_loadgen(predict: Callable[[int], object], max_batch: int, lg_settings: Any, *,
                sample_pool: int) -> tuple[LoadgenRecord, SutStats]:
    """(metrics["loadgen"], the SUT's stats) of one LoadGen run, its logs in a temporary directory that is removed
    whatever happens. Python's switch interval is `SWITCH_INTERVAL_S` while LoadGen runs (restored after; said in
    loadgen["notes"]).

    A `predict` that raised is re-raised here once LoadGen has returned (its logs are dropped with it).
    """
    import mlperf_loadgen as lg

    sut = ServingSUT(predict, max_batch)
    with scratch_dir("dlperf-loadgen-") as outdir:  # a SIGKILLed worker's: its janitor removes it
        lg_sut = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
        # The inputs are the step's own (synthetic, already built): nothing to load or unload per sample.
        lg_qsl = lg.ConstructQSL(sample_pool, sample_pool, _nothing_to_load, _nothing_to_load)
        switch_s = sys.getswitchinterval()
        sut.start()
        try:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            lg.StartTestWithLogSettings(lg_sut, lg_qsl, lg_settings, log_settings(outdir))
        finally:
            sys.setswitchinterval(switch_s)
            sut.stop()
            lg.DestroyQSL(lg_qsl)
            lg.DestroySUT(lg_sut)
        if sut.error is not None:
            raise sut.error
        out = Path(outdir)
        loadgen = loadgen_dict((out / "mlperf_log_detail.txt").read_text(),
                               (out / "mlperf_log_summary.txt").read_text())
    loadgen["notes"] = [f"Python's thread switch interval {SWITCH_INTERVAL_S * 1e3:g} ms while LoadGen ran "
                        f"({switch_s * 1e3:g} ms before and after): LoadGen's issue callback needs the GIL"]
    return loadgen, sut.stats()


def _nothing_to_load(sample_indices: Any) -> None:
    """The QSL's load/unload: the samples are the step's built inputs, on the device already."""
