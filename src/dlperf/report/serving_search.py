"""The Server scenario's rate search in the serving report: every probe, the best valid rate, and the plot.

A Server case without `target_qps` runs LoadGen at several offered rates and keeps each probe
(`metrics["server_search"]`, written by `dlperf.serving`, read as `core.payloads.ServerSearch`): its offered
rate, LoadGen's verdict and reasons, the completed samples/s and the 99th percentile latency LoadGen measured.
The best valid rate is the highest offered rate LoadGen judged VALID, as the search stored it; the plot draws p99
latency against offered load per framework or runtime with the latency bound, VALID and INVALID probes marked
differently.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from dlperf.core.payloads import SearchProbe, ServerSearch
from dlperf.core.result import CaseResult
from dlperf.report.plots.serving import SearchPanel, search_plot
from dlperf.report.sections import Figure, Note, Section, Table
from dlperf.report.serving_cells import RULES_LEGEND, SHORTENED, model_label, order, rules_short, shortened
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_rate, format_time

#: Short headers so the tables fit a 120-column terminal: the titles give the units, the best-rate table each
#: case's latency bound and MLPerf rules, a note under it why each search stopped.
PROBE_HEADER = ["framework", "device", "model", "max_batch", "#", "offered", "LoadGen verdict", "completed",
                "p99", "wall"]
BEST_HEADER = ["framework", "device", "model", "max_batch", "p99 bound", "best valid rate", "VALID/probes",
               "MLPerf rules"]


#: What a case whose search stored nothing reads as.
NO_SEARCH = ServerSearch()


def search(r: CaseResult) -> ServerSearch | None:
    """The case's stored rate search, None where it ran none (a fixed target_qps, or a failed case)."""
    return r.m.server_search_summary()


def searched(data: ReportData) -> list[CaseResult]:
    return sorted((r for r in data.of("serve") if search(r) is not None), key=order)


def probe_verdict(p: SearchProbe) -> str:
    if p.validity is None:
        return f"{MISSING} (not stored)"
    return (f"INVALID ({'; '.join(p.invalid_reasons) or 'no reason stored'})" if p.validity == "INVALID"
            else p.validity)


def _case_cells(r: CaseResult) -> list[str]:
    return [r.framework, r.device, model_label(r.params), str(r.params.get("max_batch", MISSING))]


def probe_rows(rs: list[CaseResult]) -> list[list[str]]:
    """One row per probe, in the order the search ran them."""
    rows = []
    for r in rs:
        for i, p in enumerate((search(r) or NO_SEARCH).probes, 1):
            rows.append(_case_cells(r) + [str(i), format_rate(p.target_qps), probe_verdict(p),
                                          format_rate(p.completed_qps), format_time(p.latency_p99_s),
                                          format_time(p.wall_s)])
    return rows


def best_rows(rs: list[CaseResult]) -> list[list[str]]:
    """Per searched case: its latency bound, the best valid offered rate (or that none was valid), the probes."""
    rows = []
    for r in rs:
        s = search(r) or NO_SEARCH
        valid = sum(1 for p in s.probes if p.validity == "VALID")
        pct = s.percentile
        bound = format_time(s.target_latency_s)
        rows.append(_case_cells(r) + [bound + (f" at p{pct * 100:g}" if pct and pct != 0.99 else ""),
                                      ("none VALID" if s.best_qps is None else format_rate(s.best_qps)
                                       + ("" if s.confirmed else " unconfirmed")),
                                      f"{valid} / {len(s.probes)}", rules_short(r)])
    return rows


def stopped_notes(rs: list[CaseResult]) -> list[Section]:
    """Under the best-rate table: why each search stopped (a sentence each, too long for a cell)."""
    return [Note(f"search stopped: {r.framework} {r.device} {model_label(r.params)} max_batch "
                 f"{r.params.get('max_batch', MISSING)}: {(search(r) or NO_SEARCH).stopped or MISSING}") for r in rs]


@dataclass
class _Panel:
    """A served model's panel while its probes are gathered (`SearchPanel` once done)."""

    bounds: set[float] = field(default_factory=set)
    lines: defaultdict[str, list[tuple[float, float, bool]]] = field(default_factory=lambda: defaultdict(list))
    undrawn: int = 0
    shortened: bool = False


def plot_panels(rs: list[CaseResult]) -> dict[str, SearchPanel]:
    """Per served model: the latency bounds, whether any of its searches was shortened below MLPerf's rules and, per
    framework/device/max_batch, its probes [(offered samples/s, p99 s, VALID?)]; probes without both figures are
    counted, not drawn."""
    panels: defaultdict[str, _Panel] = defaultdict(_Panel)
    for r in rs:
        s = search(r) or NO_SEARCH
        panel = panels[model_label(r.params)]
        panel.shortened = panel.shortened or bool(shortened(r))
        if s.target_latency_s is not None:
            panel.bounds.add(s.target_latency_s)
        label = f"{r.framework} {r.device} max_batch {r.params.get('max_batch', MISSING)}"
        for p in s.probes:
            if p.target_qps is None or p.latency_p99_s is None:
                panel.undrawn += 1
                continue
            panel.lines[label].append((p.target_qps, p.latency_p99_s, p.validity == "VALID"))
    return {k: {"bounds": sorted(v.bounds), "lines": dict(sorted(v.lines.items())), "undrawn": v.undrawn,
                "shortened": v.shortened} for k, v in sorted(panels.items())}


def sections(data: ReportData) -> list[Section]:
    rs = searched(data)
    if not rs:
        return []
    out: list[Section] = [
        Table("serving Server: the rate search, every probe in the order run (#: the probe; offered and completed: "
              "samples/s; p99: its latency; wall: the probe's wall time)", PROBE_HEADER, probe_rows(rs),
              heading="## Serving: the Server rate search",
              intro="Without a target rate, a Server case runs LoadGen at several offered rates to find the highest "
                    "one whose 99th percentile latency meets the bound; each probe is LoadGen's own run and verdict.",
              text_cols=(2, 6)),
        Table("serving Server: best valid rate per framework/runtime (the highest offered samples/s LoadGen judged "
              "VALID)", BEST_HEADER, best_rows(rs), text_cols=(2,)),
        *stopped_notes(rs),
    ]
    short = [r for r in rs if shortened(r)]
    if short:
        why = "; ".join(dict.fromkeys(x for r in short for x in shortened(r)))
        out.append(Note(f"{SHORTENED} ({why}): the searches of {len(short)} of {len(rs)} Server case(s)",
                        markdown=f"**{SHORTENED}** ({why}): the searches of {len(short)} of {len(rs)} Server "
                                 "case(s)."))
    else:
        out.append(Note(RULES_LEGEND))
    panels = plot_panels(rs)
    undrawn = sum(p["undrawn"] for p in panels.values())
    if undrawn:
        out.append(Note(f"{undrawn} probe(s) stored no offered rate or no p99 latency: not drawn in the plot"))
    paths = search_plot(panels, data.plot_dir)
    if paths:  # a panel of shortened searches says so in its title; the note above the plot says why
        out.append(Figure(paths, "Server p99 latency against offered load per framework/runtime, the latency bound "
                                 "dashed, VALID probes as dots, INVALID probes as crosses",
                          heading="## Server latency against offered load"))
    return out
