"""The `serve` workload's report (the `serving` study): MLPerf Inference scenarios as LoadGen judged them.

One section per scenario present (SingleStream, MultiStream, Server, Offline), one row per case: what served
(framework or runtime, device, model, the system under test's largest batch, threads), LoadGen's verdict
(VALID, or INVALID and LoadGen's own reasons), the scenario's MLPerf metric as LoadGen reports it (its name and
unit), the latency percentiles and mean LoadGen logged (nanoseconds, shown in readable units), the rates it
logged, and whether the run met MLPerf's durations and query counts: a run shortened below them (`--quick`) is
labelled "shortened: below MLPerf's rules (...)" in its row and under its table, in every format. Failed cases
keep their row with their status and reason. The Server rate search (probes, best valid rate, the plot of
latency against offered load) is `serving_search`. Every figure comes from the stored dict (`metrics["loadgen"]`,
written by `dlperf.serving`); a key that is not there prints "-" with the reason where one is known.
"""

from __future__ import annotations

from collections import defaultdict

from dlperf.core.result import CaseResult
from dlperf.report import serving_search
from dlperf.report.sections import Heading, Note, Section, Table
from dlperf.report.serving_cells import (
    PERCENTILES,
    SHORTENED,
    latencies,
    loadgen,
    metric_text,
    model_label,
    offered,
    order,
    rules_label,
    scenario,
    shortened,
    verdict,
)
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_rate, format_time

ORDER = ("SingleStream", "MultiStream", "Server", "Offline")
#: Per scenario: the extra columns and the LoadGen key each reads (None: computed here, see `_extra`).
EXTRA: dict[str, tuple[tuple[str, str | None], ...]] = {
    "SingleStream": (("queries", "result_query_count"),
                     ("achieved samples/s", "result_qps_with_loadgen_overhead")),
    "MultiStream": (("samples/query", None), ("queries", "result_query_count")),
    "Server": (("offered samples/s", None), ("scheduled samples/s", "result_scheduled_samples_per_sec"),
               ("completed samples/s", "result_completed_samples_per_sec"),
               ("over-latency queries", "result_overlatency_query_count"), ("queries", "result_query_count")),
    "Offline": (("queries", "result_query_count"), ("achieved samples/s", "result_samples_per_second")),
}
INTRO = {
    "SingleStream": "One query of one sample at a time, the next issued when the last completes; MLPerf's metric "
                    "is the 90th percentile latency. Achieved samples/s: LoadGen's queries/s with its own overhead.",
    "MultiStream": "Queries of several samples, the next issued when the last completes; MLPerf's metric is the "
                   "99th percentile latency per query (the percentiles below are per query).",
    "Server": "Queries of one sample arriving at Poisson times at the offered rate; VALID needs the 99th percentile "
              "latency within the bound. Scheduled and completed samples/s are LoadGen's.",
    "Offline": "Every sample in one query at the start; MLPerf's metric is samples/s.",
}


def _extra(r: CaseResult, scen: str) -> list[str]:
    lg = loadgen(r)
    res, eff = lg.get("results") or {}, lg.get("effective") or {}
    out = []
    for name, key in EXTRA.get(scen, ()):
        if name == "samples/query":
            v = eff.get("effective_samples_per_query")
            out.append(str(v) if v is not None else MISSING)
        elif name == "offered samples/s":
            out.append(format_rate(offered(r)))
        elif name == "queries" or name == "over-latency queries":
            v = res.get(key or "")
            out.append(str(v) if v is not None else MISSING)
        else:
            v = res.get(key or "")
            out.append(format_rate(float(v)) if isinstance(v, (int, float)) else MISSING)
    return out


def header(scen: str, reps: bool) -> list[str]:
    lat = [f"{name} per query" for name, _ in PERCENTILES] + ["mean per query"] if scen == "MultiStream" else \
        [name for name, _ in PERCENTILES] + ["mean"]
    return (["framework", "device", "model", "max_batch", "threads"] + (["rep"] if reps else [])
            + ["status", "LoadGen verdict", "MLPerf metric"] + lat + [name for name, _ in EXTRA.get(scen, ())]
            + ["MLPerf rules"])


def row(r: CaseResult, scen: str, reps: bool) -> list[str]:
    threads = r.m.threads
    return ([r.framework, r.device, model_label(r.params), str(r.params.get("max_batch", MISSING)),
             str(threads) if threads is not None else MISSING] + ([str(r.repetition)] if reps else [])
            + [r.status, verdict(r), metric_text(r)]
            + (latencies(r, scen) + _extra(r, scen) if r.ok else [MISSING] * (5 + len(EXTRA.get(scen, ()))))
            + [rules_label(r)])


def serve_results(data: ReportData) -> dict[str, list[CaseResult]]:
    """The run's serve cases by scenario, in MLPerf's order (unknown names last)."""
    by: dict[str, list[CaseResult]] = defaultdict(list)
    for r in data.of("serve"):
        by[scenario(r)].append(r)
    names = [s for s in ORDER if s in by] + sorted(s for s in by if s not in ORDER)
    return {s: sorted(by[s], key=order) for s in names}


def shortened_note(rs: list[CaseResult], scen: str) -> list[Section]:
    """Under a table: how many of its runs were shortened below MLPerf's rules, and why (each reason once)."""
    short = [r for r in rs if shortened(r)]
    if not short:
        return []
    why = "; ".join(dict.fromkeys(s for r in short for s in shortened(r)))
    rest = (f"{len(short)} of the {len(rs)} {scen} case(s); LoadGen judged them against these shortened settings, "
            "so their verdicts are not MLPerf results")
    return [Note(f"{SHORTENED} ({why}): {rest}", markdown=f"**{SHORTENED}** ({why}): {rest}.")]


def scenario_sections(scen: str, rs: list[CaseResult]) -> list[Section]:
    reps = any(r.repetition for r in rs)
    table = Table(f"serving {scen}: LoadGen's verdict, metric and latencies", header(scen, reps),
                  [row(r, scen, reps) for r in rs], heading=f"## Serving: {scen}", intro=INTRO.get(scen),
                  text_cols=(2, 6 + reps, -1))
    return [table, *shortened_note(rs, scen)]


def _valid_rate(r: CaseResult) -> float | None:
    """The case's highest valid Server rate: its search's best, or its own offered rate where LoadGen said VALID."""
    search = r.m.get("server_search")
    if isinstance(search, dict):
        best = search.get("best_qps")
        return float(best) if isinstance(best, (int, float)) else None
    return offered(r) if loadgen(r).get("validity") == "VALID" else None


def _p90(r: CaseResult) -> float | None:
    """A VALID SingleStream case's metric (LoadGen's p90 latency, seconds)."""
    lg = loadgen(r)
    m = lg.get("metric") or {}
    if lg.get("validity") != "VALID" or m.get("unit") != "s" or not isinstance(m.get("value"), (int, float)):
        return None
    return float(m["value"])


def _who(r: CaseResult) -> str:
    return f"{r.framework} {r.device} max_batch {r.params.get('max_batch', MISSING)}"


def comparison_notes(data: ReportData) -> list[Section]:
    """Per served model: which framework or runtime served the highest valid Server rate and the lowest VALID
    SingleStream p90 (the others beside it); shortened runs say so."""
    by: dict[str, list[CaseResult]] = defaultdict(list)
    for r in data.of("serve"):
        if r.ok:
            by[model_label(r.params)].append(r)
    out: list[Section] = []
    for model, rs in sorted(by.items()):
        parts = []
        server = [r for r in rs if scenario(r) == "Server"]
        if server:
            rated = sorted(((v, r) for r in server if (v := _valid_rate(r)) is not None), key=lambda x: -x[0])
            if rated:
                others = ", ".join(f"{_who(r)} {format_rate(v)}" for v, r in rated[1:])
                parts.append(f"highest valid Server rate: {_who(rated[0][1])} ({format_rate(rated[0][0])} samples/s "
                             f"offered{'; ' + others if others else ''})" + _short_tag([r for _, r in rated]))
            else:
                parts.append(f"no valid Server rate ({len(server)} Server case(s), none VALID)")
        single = [r for r in rs if scenario(r) == "SingleStream"]
        if single:
            timed = sorted(((v, r) for r in single if (v := _p90(r)) is not None), key=lambda x: x[0])
            if timed:
                others = ", ".join(f"{_who(r)} {format_time(v)}" for v, r in timed[1:])
                parts.append(f"lowest SingleStream p90: {_who(timed[0][1])} ({format_time(timed[0][0])}"
                             f"{'; ' + others if others else ''})" + _short_tag([r for _, r in timed]))
            else:
                parts.append(f"no SingleStream case LoadGen judged VALID ({len(single)} case(s))")
        if parts:
            out.append(Note(f"{model}: " + "; ".join(parts)))
    return out


def _short_tag(rs: list[CaseResult]) -> str:
    return f" [{SHORTENED}]" if any(shortened(r) for r in rs) else ""


def sections(data: ReportData) -> list[Section]:
    """A section per scenario present, the Server search, and the comparison per model."""
    by = serve_results(data)
    if not by:
        return []
    versions = sorted({str(v) for r in data.of("serve") if (v := loadgen(r).get("loadgen_version"))})
    out: list[Section] = [Heading("## Serving: MLPerf Inference scenarios under LoadGen",
                                  "Each case served by the official MLPerf LoadGen (mlcommons-loadgen "
                                  f"{', '.join(versions) or 'version not stored'}); verdicts, metrics, percentiles "
                                  "and rates are LoadGen's own, latencies converted from its nanoseconds.")]
    for scen, rs in by.items():
        out += scenario_sections(scen, rs)
    out += serving_search.sections(data)
    comparison = comparison_notes(data)
    if comparison:
        out += [Heading("## Serving: who served best", "Per model, among the cases LoadGen judged VALID.")]
        out += comparison
    return out
