"""The `serve` workload's report (the `serving` study): MLPerf Inference scenarios as LoadGen judged them.

One section per scenario present (SingleStream, MultiStream, Server, Offline), each three narrow tables (so they
fit a 120-column terminal) with a row per case: what served (framework or runtime, device, model, the system
under test's largest batch, threads) with LoadGen's verdict (VALID, or INVALID and LoadGen's own reasons), the
scenario's MLPerf metric's value (its name and unit in the note under the table) and whether the run met MLPerf's
durations and query counts ("yes" or "shortened"; the note under the table says "shortened: below MLPerf's rules
(...)" with the reasons, in every format); then the latency percentiles and mean LoadGen logged (nanoseconds,
shown in readable units); then the rates and counts it logged. Failed cases keep their row in the verdict table
with their status and reason (the status column is there only when a case did not end ok). The Server rate
search (probes, best valid rate, the plot of latency against offered load) is `serving_search`. Every figure
comes from the stored dict (`metrics["loadgen"]`, written by `dlperf.serving`, read as `core.payloads.
LoadgenSummary`); a key that is not there prints
"-" with the reason where one is known.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from dlperf.core.result import CaseResult
from dlperf.report import serving_search
from dlperf.report.sections import Heading, Note, Section, Table
from dlperf.report.serving_cells import (
    PERCENTILES,
    RULES_LEGEND,
    SHORTENED,
    latencies,
    loadgen,
    metric_name,
    metric_value,
    model_label,
    offered,
    order,
    rules_short,
    scenario,
    shortened,
    verdict,
)
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_rate, format_time

ORDER = ("SingleStream", "MultiStream", "Server", "Offline")
#: The columns naming what served, in every serving table (the verdict table adds threads).
IDENT = ["framework", "device", "model", "max_batch"]
#: Per scenario: the rates-and-counts table's title, its columns and the LoadGen key each reads (None: computed
#: here, see `_extra`). Headers are short so the tables fit a 120-column terminal; the title gives the units.
EXTRA: dict[str, tuple[str, tuple[tuple[str, str | None], ...]]] = {
    "SingleStream": ("queries and achieved samples/s (LoadGen's queries/s with its own overhead)",
                     (("queries", "result_query_count"), ("samples/s", "result_qps_with_loadgen_overhead"))),
    "MultiStream": ("samples per query and queries",
                    (("samples/query", None), ("queries", "result_query_count"))),
    "Server": ("rates in samples/s (offered, scheduled and completed, LoadGen's) and queries (late: over the "
               "latency bound)",
               (("offered", None), ("scheduled", "result_scheduled_samples_per_sec"),
                ("completed", "result_completed_samples_per_sec"), ("late queries", "result_overlatency_query_count"),
                ("queries", "result_query_count"))),
    "Offline": ("queries and samples/s",
                (("queries", "result_query_count"), ("samples/s", "result_samples_per_second"))),
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
    res, eff = lg.results, lg.effective
    out = []
    for name, key in EXTRA[scen][1] if scen in EXTRA else ():
        if name == "samples/query":
            v = eff.get("effective_samples_per_query")
            out.append(str(v) if v is not None else MISSING)
        elif name == "offered":
            out.append(format_rate(offered(r)))
        elif name in ("queries", "late queries"):
            v = res.get(key or "")
            out.append(str(v) if v is not None else MISSING)
        else:
            v = res.get(key or "")
            out.append(format_rate(float(v)) if isinstance(v, (int, float)) else MISSING)
    return out


def ident(r: CaseResult) -> list[str]:
    """framework, device, model, max_batch."""
    return [r.framework, r.device, model_label(r.params), str(r.params.get("max_batch", MISSING))]


def verdict_header(reps: bool, statuses: bool) -> list[str]:
    return (IDENT + ["threads"] + (["rep"] if reps else []) + (["status"] if statuses else [])
            + ["LoadGen verdict", "MLPerf metric", "MLPerf rules"])


def metric_marks(rs: list[CaseResult]) -> list[str]:
    """The distinct metric names of a table's cases, in order (a row's mark is its name's position + 1)."""
    return list(dict.fromkeys(n for r in rs if (n := metric_name(r)) is not None))


def verdict_row(r: CaseResult, reps: bool, statuses: bool, names: list[str]) -> list[str]:
    threads = r.m.threads
    value = metric_value(r)
    name = metric_name(r)
    if len(names) > 1 and name is not None:
        value += f" [{names.index(name) + 1}]"
    return (ident(r) + [str(threads) if threads is not None else MISSING] + ([str(r.repetition)] if reps else [])
            + ([r.status] if statuses else []) + [verdict(r), value, rules_short(r)])


def latency_header(scen: str, reps: bool) -> list[str]:
    return IDENT + (["rep"] if reps else []) + [name for name, _ in PERCENTILES] + ["mean"]


def extra_header(scen: str, reps: bool) -> list[str]:
    return IDENT + (["rep"] if reps else []) + [name for name, _ in EXTRA[scen][1]]


def serve_results(data: ReportData) -> dict[str, list[CaseResult]]:
    """The run's serve cases by scenario, in MLPerf's order (unknown names last)."""
    by: dict[str, list[CaseResult]] = defaultdict(list)
    for r in data.of("serve"):
        by[scenario(r)].append(r)
    names = [s for s in ORDER if s in by] + sorted(s for s in by if s not in ORDER)
    return {s: sorted(by[s], key=order) for s in names}


def shortened_note(rs: list[CaseResult], scen: str) -> list[Section]:
    """Under a table: how many of its runs were shortened below MLPerf's rules, and why (each reason once); where
    none was, what the "MLPerf rules" column's words mean."""
    short = [r for r in rs if shortened(r)]
    if not short:
        return [Note(RULES_LEGEND)] if any(r.ok for r in rs) else []
    why = "; ".join(dict.fromkeys(s for r in short for s in shortened(r)))
    rest = (f"{len(short)} of the {len(rs)} {scen} case(s); LoadGen judged them against these shortened settings, "
            "so their verdicts are not MLPerf results")
    return [Note(f"{SHORTENED} ({why}): {rest}", markdown=f"**{SHORTENED}** ({why}): {rest}.")]


def metric_note(rs: list[CaseResult], scen: str) -> list[Section]:
    """Under the verdict table: the MLPerf metric's name (and unit), marked [n] where the cases' differ."""
    names = metric_marks(rs)
    if not names:
        return []
    if len(names) == 1:
        return [Note(f"MLPerf metric ({scen}): {names[0]}")]
    return [Note(f"MLPerf metric ({scen}): " + "; ".join(f"[{i}] {n}" for i, n in enumerate(names, 1)))]


def scenario_sections(scen: str, rs: list[CaseResult]) -> list[Section]:
    """The verdict table (with its notes), then LoadGen's latencies, then its rates and counts (ok cases only)."""
    reps = any(r.repetition for r in rs)
    statuses = not all(r.ok for r in rs)
    names = metric_marks(rs)
    per = " per query" if scen == "MultiStream" else ""
    out: list[Section] = [
        Table(f"serving {scen}: LoadGen's verdict and the MLPerf metric", verdict_header(reps, statuses),
              [verdict_row(r, reps, statuses, names) for r in rs], heading=f"## Serving: {scen}",
              intro=INTRO.get(scen), text_cols=(2, 5 + reps + statuses)),
        *metric_note(rs, scen), *shortened_note(rs, scen)]
    ok = [r for r in rs if r.ok]
    if ok:
        out.append(Table(f"serving {scen}: LoadGen's latencies{per}", latency_header(scen, reps),
                         [ident(r) + ([str(r.repetition)] if reps else []) + latencies(r, scen) for r in ok],
                         text_cols=(2,)))
    if ok and scen in EXTRA:
        out.append(Table(f"serving {scen}: {EXTRA[scen][0]}", extra_header(scen, reps),
                         [ident(r) + ([str(r.repetition)] if reps else []) + _extra(r, scen) for r in ok],
                         text_cols=(2,)))
    return out


def _valid_rate(r: CaseResult) -> float | None:
    """The case's highest valid Server rate: its search's best, or its own offered rate where LoadGen said VALID."""
    search = r.m.server_search_summary()
    if search is not None:
        return search.best_qps
    return offered(r) if loadgen(r).validity == "VALID" else None


def _p90(r: CaseResult) -> float | None:
    """A VALID SingleStream case's metric (LoadGen's p90 latency, seconds)."""
    lg = loadgen(r)
    m = lg.metric
    if lg.validity != "VALID" or m is None or m.unit != "s" or m.value is None:
        return None
    return float(m.value)


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
            parts.append(_ranking("highest valid Server rate", server, _valid_rate, format_rate, highest=True,
                                  unit=" samples/s offered",
                                  none=f"no valid Server rate ({len(server)} Server case(s), none VALID)"))
        single = [r for r in rs if scenario(r) == "SingleStream"]
        if single:
            parts.append(_ranking("lowest SingleStream p90", single, _p90, format_time, highest=False, unit="",
                                  none=f"no SingleStream case LoadGen judged VALID ({len(single)} case(s))"))
        if parts:
            out.append(Note(f"{model}: " + "; ".join(parts)))
    return out


def _ranking(what: str, rs: list[CaseResult], value: Callable[[CaseResult], float | None],
             fmt: Callable[[float], str], *, highest: bool, unit: str, none: str) -> str:
    """"what: the best case (its value and unit; the others beside it)", best first, or `none` where no case has
    a value; shortened runs tagged."""
    ranked = sorted(((v, r) for r in rs if (v := value(r)) is not None), key=lambda x: -x[0] if highest else x[0])
    if not ranked:
        return none
    (best, top), rest = ranked[0], ranked[1:]
    others = ", ".join(f"{_who(r)} {fmt(v)}" for v, r in rest)
    return (f"{what}: {_who(top)} ({fmt(best)}{unit}{'; ' + others if others else ''})"
            + _short_tag([r for _, r in ranked]))


def _short_tag(rs: list[CaseResult]) -> str:
    return f" [{SHORTENED}]" if any(shortened(r) for r in rs) else ""


def sections(data: ReportData) -> list[Section]:
    """A section per scenario present, the Server search, and the comparison per model."""
    by = serve_results(data)
    if not by:
        return []
    versions = sorted({v for r in data.of("serve") if (v := loadgen(r).loadgen_version)})
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
