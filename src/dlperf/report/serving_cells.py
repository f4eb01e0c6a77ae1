"""The cells every serving table shares, read from a serve case's stored LoadGen summary (`metrics["loadgen"]`,
typed by `core.payloads.LoadgenSummary`).

What served (model label), LoadGen's verdict with its reasons, the scenario's metric in its unit, latencies from
LoadGen's nanoseconds, the offered rate, and the label of a run shortened below MLPerf's rules. A key that is not
stored gives "-" (with the reason where one is known), never a number from elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlperf.core.payloads import LoadgenSummary
from dlperf.core.result import CaseResult
from dlperf.core.status import SHORTENED
from dlperf.serving.settings import SCENARIOS
from dlperf.units import MISSING, format_rate, format_time

#: (column, the percentile as LoadGen spells it in its MLLOG keys: result_<p>_percentile_latency_ns).
PERCENTILES = (("p50", "50.00"), ("p90", "90.00"), ("p99", "99.00"), ("p99.9", "99.90"))
FULL_RULES = "MLPerf's durations and counts"
#: The short "MLPerf rules" cell (the note under each table gives the reasons and the full label).
RULES_YES, RULES_SHORT = "yes", "shortened"
RULES_LEGEND = f"MLPerf rules: {RULES_YES} = {FULL_RULES}; {RULES_SHORT} = {SHORTENED}"


#: What a case that stored no LoadGen summary reads as: every field absent.
NO_SUMMARY = LoadgenSummary(empty=True)


def loadgen(r: CaseResult) -> LoadgenSummary:
    """The case's stored LoadGen summary, NO_SUMMARY where it has none."""
    return r.m.loadgen_summary() or NO_SUMMARY


def scenario(r: CaseResult) -> str:
    """LoadGen's name of the case's scenario (its stored one, else the case's parameter)."""
    stored = loadgen(r).scenario
    asked = str(r.params.get("scenario", ""))
    return str(stored or SCENARIOS.get(asked, asked or "unknown scenario"))


def model_label(p: dict[str, Any]) -> str:
    """What is served, in one cell: workload and model, its shape where set, its precision where not fp32."""
    parts = [str(p.get("workload", "?")), str(p.get("model", "?"))]
    parts += [f"T={p['seq_len']}"] if p.get("seq_len") else []
    parts += [f"{p['image_size']}px"] if p.get("image_size") else []
    parts += [str(p["precision"])] if p.get("precision") not in (None, "fp32") else []
    return " ".join(parts)


def shortened(r: CaseResult) -> list[str]:
    """Why the case's run was shorter than MLPerf's rules ([] where it was not or nothing is stored)."""
    return list(loadgen(r).shortened or ())


def rules_label(r: CaseResult) -> str:
    """"shortened: below MLPerf's rules (why)", MLPerf's own, or why it cannot be said."""
    if not r.ok:
        return MISSING
    if loadgen(r).shortened is None:
        return f"{MISSING} (not stored)"
    why = shortened(r)
    return f"{SHORTENED} ({'; '.join(why)})" if why else FULL_RULES


def rules_short(r: CaseResult) -> str:
    """The short "MLPerf rules" cell: yes, shortened, "-" (a failed case) or "not stored"."""
    if not r.ok:
        return MISSING
    if loadgen(r).shortened is None:
        return "not stored"
    return RULES_SHORT if shortened(r) else RULES_YES


def verdict(r: CaseResult) -> str:
    """LoadGen's verdict: VALID, INVALID (its reasons), or why there is none (a failed case's status and reason)."""
    if not r.ok:
        return f"{MISSING} (case {r.status}: {r.reason or 'no reason stored'})"
    lg = loadgen(r)
    if lg.empty:
        return f"{MISSING} (no LoadGen result stored)"
    if lg.validity is None:
        return f"{MISSING} (LoadGen's validity not stored)"
    if lg.validity == "INVALID":
        return f"INVALID ({'; '.join(lg.invalid_reasons) or 'no reason stored'})"
    return lg.validity


def metric_value(r: CaseResult) -> str:
    """The scenario's MLPerf metric's value alone (its name and unit are in the note under the table): a latency
    as a readable time, a rate as a number; "-" where it is not stored."""
    m = loadgen(r).metric
    if m is None or not m.name:
        return MISSING
    if m.value is None:
        return f"{MISSING} (none)"
    return format_time(float(m.value)) if m.unit == "s" else format_rate(float(m.value))


def metric_name(r: CaseResult) -> str | None:
    """The metric's name as stored, with its unit where the name does not say it (None: no metric stored)."""
    m = loadgen(r).metric
    if m is None or not m.name:
        return None
    name, unit = m.name, m.unit
    return name if not unit or unit == "s" or unit in name else f"{name} ({unit})"


def ns_time(results: Mapping[str, Any], key: str) -> str:
    """A LoadGen latency (nanoseconds) as a readable time, "-" where the key is not there."""
    v = results.get(key)
    return format_time(v / 1e9) if isinstance(v, (int, float)) else MISSING


def latencies(r: CaseResult, scen: str) -> list[str]:
    """p50, p90, p99, p99.9 and mean (per query in MultiStream, per sample otherwise)."""
    res = loadgen(r).results
    what = "per_query_latency_ns" if scen == "MultiStream" else "latency_ns"
    mean = "result_mean_query_latency_ns" if scen == "MultiStream" else "result_mean_latency_ns"
    return [ns_time(res, f"result_{p}_percentile_{what}") for _, p in PERCENTILES] + [ns_time(res, mean)]


def offered(r: CaseResult) -> float | None:
    """The Server rate LoadGen was asked for (its effective setting, else the case's target_qps)."""
    v = loadgen(r).effective.get("effective_target_qps", r.params.get("target_qps"))
    return float(v) if isinstance(v, (int, float)) else None


def order(r: CaseResult) -> tuple[Any, ...]:
    return (model_label(r.params), r.framework, r.device, int(r.params.get("max_batch") or 0), r.repetition)


