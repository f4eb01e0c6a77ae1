"""The `collectives` workload's report: time and bandwidth of all-reduce, all-gather, reduce-scatter and broadcast.

Per operation (and per framework, device, backend, dtype and threads per rank), a table with a row per message
size and world size: the size S as nccl-tests counts it (binary units, `units.format_size`), the median time of
one operation (the slowest rank's; repetitions pooled) with its 95% interval, and the algorithm and bus bandwidth
with nccl-tests' definitions (`dlperf.distributed.bandwidth`), recomputed here from the median of the raw samples
as loaded, never read from the copies stored with the case. GB/s is decimal (10^9 bytes/s), as nccl-tests prints
it. The bus factor and whether every rank's output was checked equal to the expected values come with each row.
Cases that did not run keep their row with their status and reason. A plot draws busbw against message size, a
line per operation.
"""

from __future__ import annotations

from collections import defaultdict

from dlperf.core.payloads import CollectiveMetrics
from dlperf.core.result import CaseResult
from dlperf.distributed.bandwidth import OPS, bandwidths, bus_factor
from dlperf.report.ddp_report import interval_text, status_cell, validity_mark
from dlperf.report.inference_report import failure_mark, latency
from dlperf.report.ops_report import VALIDITY_MARKS_NOTE
from dlperf.report.plots.scaling import busbw_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import GB_BYTES, MISSING, format_iqr, format_number, format_size, format_time

WORKLOAD = "collectives"
DEFINITIONS = ("algbw = S / t, with S the operation's largest buffer (all-reduce, broadcast: the buffer; "
               "all-gather: the gathered output; reduce-scatter: the input) and t the median time of one operation "
               "as the slowest rank saw it; busbw = algbw x the bus factor: 2(n-1)/n for all-reduce, (n-1)/n for "
               "all-gather and reduce-scatter, 1 for broadcast (nccl-tests' doc/PERFORMANCE.md), so it can be set "
               "against a link's speed whatever the number of ranks n. GB/s = 10^9 bytes/s (as nccl-tests); sizes "
               "in binary units (1 KiB = 1024 bytes)")
GLOO_NOTE = ("gloo on one host: the ranks exchange data through loopback TCP on this machine, so these figures "
             "measure memory copies and the kernel's TCP stack, not a network or an interconnect")
ONE_RANK_NOTE = ("one rank: the bus factor of all-reduce, all-gather and reduce-scatter is 0 (no data crosses a "
                 "link), so busbw is 0 there")


#: What a case that stored no job record (a failed case) reads as: every field absent.
NO_RECORD = CollectiveMetrics()


def record(r: CaseResult) -> CollectiveMetrics:
    """The case's stored `metrics["collective"]`, NO_RECORD where it has none (a failed case)."""
    return r.m.collective_summary() or NO_RECORD


def backend(r: CaseResult) -> str:
    from dlperf.distributed.launch import backend_for

    return record(r).backend or backend_for(r.device)


def recomputed(op: str, size_bytes: int, world_size: int, median_s: float | None) -> tuple[float, float] | None:
    """(algbw, busbw) in bytes/s from the median recomputed on load (None where there is no median)."""
    if median_s is None or median_s <= 0:
        return None
    return bandwidths(op, size_bytes, world_size, median_s)


GroupKey = tuple[str, str, str, str, str]  # framework, device, backend, dtype, the other fixed parameters


def grouped(results: list[CaseResult]) -> dict[GroupKey, dict[str, dict[tuple[int, int], list[CaseResult]]]]:
    """Per setup: op (in `OPS` order) -> (size, world size) -> the case's repetitions, sorted."""
    by: dict[GroupKey, dict[str, dict[tuple[int, int], list[CaseResult]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in results:
        p = r.params
        rest = ", ".join(f"{k}={p[k]}" for k in sorted(p) if k not in ("op", "size_bytes", "world_size", "dtype"))
        key = (r.framework, r.device, backend(r), str(p.get("dtype", "float32")), rest)
        by[key][str(p.get("op"))][(int(p.get("size_bytes") or 0), int(p.get("world_size") or 0))].append(r)
    out = {}
    for key in sorted(by):
        ops = sorted(by[key], key=lambda o: (OPS.index(o) if o in OPS else len(OPS), o))
        out[key] = {op: dict(sorted(by[key][op].items())) for op in ops}
    return out


def checked_cell(rs: list[CaseResult]) -> str:
    """yes where every ok repetition's ranks held the expected output, NO where one did not, - where not stored."""
    flags = [record(r).checked for r in rs if r.ok]
    if not flags or any(f is None for f in flags):
        return MISSING
    return "yes" if all(flags) else "NO"


def op_table(key: GroupKey, op: str, cases: dict[tuple[int, int], list[CaseResult]]) -> list[Section]:
    """The op's table over message sizes and world sizes and the notes under it."""
    fw, device, back, dtype, rest = key
    every = [r for rs in cases.values() for r in rs]
    statuses = not all(r.ok for r in every)
    header = (["size", "ranks", "median op", "95% interval", "ops", "algbw GB/s", "busbw GB/s", "bus factor",
               "checked"] + (["status"] if statuses else []))
    rows: list[list[str]] = []
    notes: list[str] = []
    for (size, n), rs in cases.items():
        lat = latency(rs)
        mark = failure_mark(notes, f"{format_size(size)} on {n} ranks", rs, lat is not None)
        status = [status_cell(rs)] if statuses else []
        factor = format_number(bus_factor(op, n), ".3g") if op in OPS and n > 0 else MISSING
        if lat is None:
            rows.append([format_size(size), str(n), f"{MISSING}{mark}", MISSING, MISSING, MISSING, MISSING, factor,
                         MISSING] + status)
            continue
        vmark = validity_mark(rs)
        bw = recomputed(op, size, n, lat["median_s"])
        algbw, busbw = (format_number(b, ".3g", scale=GB_BYTES) for b in bw) if bw else (MISSING, MISSING)
        rows.append([format_size(size), str(n), format_time(lat["median_s"]) + vmark + mark,
                     interval_text(lat["low_s"], lat["high_s"]), str(lat["n"]), algbw, busbw, factor,
                     checked_cell(rs)] + status)
    title = f"collectives {op} ({dtype}, {fw} {device} {back}): time per operation and bandwidth"
    out: list[Section] = [Table(title, header, rows, heading=f"### {op} ({dtype}, {fw} {device}, {back})",
                                intro=f"Fixed: {rest}." if rest else None)]
    out += [Note(n) for n in notes]
    if any(row[8] == "NO" for row in rows):
        out.append(Note(f"checked NO: a rank's output of {op} differed from the expected values after the timing; "
                        "its time is of a wrong result"))
    return out


def plot_panels(groups: dict[GroupKey, dict[str, dict[tuple[int, int], list[CaseResult]]]]
                ) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Per setup and world size: a line per op of (size, busbw bytes/s) from the recomputed medians."""
    several = len({k[3] for k in groups}) > 1
    panels: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for (fw, device, back, dtype, _), ops in groups.items():
        for op, cases in ops.items():
            for (size, n), rs in cases.items():
                lat = latency(rs)
                bw = recomputed(op, size, n, lat["median_s"]) if lat and op in OPS else None
                if bw is not None:
                    title = f"{fw} {device} {back}, {n} rank{'s' if n != 1 else ''}"
                    title += "" if several else f", {dtype}"
                    panels[title][op + (f" {dtype}" if several else "")].append((size, bw[1]))
    return {t: dict(lines) for t, lines in sorted(panels.items())}


def sections(data: ReportData) -> list[Section]:
    """A table per operation and setup, the definitions, the gloo caveat where gloo ran, and the busbw plot."""
    groups = grouped(data.of(WORKLOAD))
    if not groups:
        return []
    out: list[Section] = [Heading("## Collectives: time per operation, algorithm and bus bandwidth",
                                  DEFINITIONS[0].upper() + DEFINITIONS[1:] + ".")]
    for key, ops in groups.items():
        for op, cases in ops.items():
            out += op_table(key, op, cases)
    if any(validity_mark([r]) for r in data.of(WORKLOAD)):
        out.append(Note(VALIDITY_MARKS_NOTE))
    out.append(Note(f"definitions: {DEFINITIONS}", markdown=""))
    if any(key[2] == "gloo" for key in groups):
        out.append(Note(GLOO_NOTE, markdown=GLOO_NOTE[0].upper() + GLOO_NOTE[1:] + "."))
    sizes = {n for ops in groups.values() for cases in ops.values() for _, n in cases}
    if 1 in sizes:
        out.append(Note(ONE_RANK_NOTE, markdown=ONE_RANK_NOTE[0].upper() + ONE_RANK_NOTE[1:] + "."))
    paths = busbw_plot(plot_panels(groups), data.plot_dir, stem="collectives-busbw")
    if paths:
        out.append(Figure(paths, "collectives: bus bandwidth against message size, a line per operation",
                          heading="## Bus bandwidth against message size"))
    return out


def progress_detail(r: CaseResult) -> str:
    """The run's line for an ok collectives case: the median per operation with algbw and busbw from it."""
    m, p = r.m, r.params
    text = f"median {format_time(m.median_s)} (IQR {format_iqr(m.iqr_rel)}, n={m.n_samples})"
    op, size, n = str(p.get("op")), int(p.get("size_bytes") or 0), int(p.get("world_size") or 0)
    bw = recomputed(op, size, n, m.median_s) if op in OPS and n > 0 else None
    if bw is None:
        return text + ", bandwidth: - (no median)"
    return (f"{text}, {op} {format_size(size)} on {n} ranks: algbw {format_number(bw[0], '.3g', scale=GB_BYTES)} "
            f"GB/s, busbw {format_number(bw[1], '.3g', scale=GB_BYTES)} GB/s")
