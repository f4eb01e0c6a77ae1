"""The `ops` study's report: study 002's own layout (size x device rows, op columns, MFlop/s and
efficiency), the study's published figures beside it, the transformer ops at their shapes, and the
roofline of every case."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.core.result import Metrics
from dlperf.hardware.caches import DRAM
from dlperf.hardware.peaks import OVERRIDES
from dlperf.hardware.roofline import ABOVE_TOLERANCE_REL, Ceilings, RooflinePoint, ceilings, roofline_point
from dlperf.report.plots.ops import bandwidth_curve_plot, roofline_plot
from dlperf.report.plots.paper import efficiency_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.studies import paper
from dlperf.units import MISSING, format_iqr, format_number, format_size
from dlperf.untrusted import path_component

REFERENCE_CSV = Path(__file__).resolve().parents[1] / "studies" / "reference" / "study002.csv"
REFERENCE_CITATION = ("study 002 (shared/seeds/002_193418cc60d7ad6c.txt): Theano on GT710M, K40 and GTX980 under "
                      "nvprof, Tables 2 and 3; efficiency = flop_sp_efficiency")
STUDY_OP_ORDER = ("add", "mul", "dot", "scalar", "sigmoid", "tanh", "relu", "softmax", "conv2d")
#: The study's own grouping: Table 2, Table 3, and dlperf's additions.
OP_GROUPS = (("Table 2", ("add", "mul", "dot")), ("Table 3", ("scalar", "sigmoid", "tanh")),
             ("beyond the study", ("relu", "softmax", "conv2d")))
#: Every op's place on the roofline and in its table (the transformer ops after the study's).
OP_ORDER = (*STUDY_OP_ORDER, "attention", "layernorm", "gelu")


@dataclass
class OpsPoint:
    """One ok case of an ops run, with its roofline figures."""

    framework: str
    device: str
    op: str
    size_mb: float
    dtype: str
    metrics: Metrics
    roof: RooflinePoint
    ceilings: Ceilings
    #: A transformer-shaped case's shape and variant ("B8 H12 T128 D64 causal flash"); "" for a sized case.
    shape: str = ""

    @property
    def label(self) -> str:
        """The op with its shape, where it has one."""
        return f"{self.op} {self.shape}".rstrip()


def ops_points(data: ReportData) -> list[OpsPoint]:
    """Roofline figures of every ok case (rates from the median; see hardware.roofline), against the
    ceilings stored with the run, else those of the peaks runs the reader pinned (finished before it)."""
    measured, peaks_run = data.measured_peaks
    stored = (data.run.derived or {}).get("ceilings")
    from dlperf.workloads.ops import OpsParams

    points = []
    for r in data.of("ops"):
        if not r.ok:
            continue
        p = r.params
        c = ceilings(data.env, r.device, p["dtype"], measured, peaks_run, stored)
        try:
            size_mb = (float(p["size_mb"]) if p.get("size_mb") is not None
                       else OpsParams.model_validate(p).working_set_mb())
        except ValueError:
            continue  # stored by another version with parameters this one cannot read: left out, the rest drawn
        points.append(OpsPoint(r.framework, r.device, p["op"], size_mb, p["dtype"], r.m,
                               roofline_point(r.m.as_dict(), c), c, shape=shape_label(p)))
    return points


#: The short names of a transformer shape's fields, in label order.
SHAPE_LABELS = (("batch", "B"), ("heads", "H"), ("seq_len", "T"), ("head_dim", "D"), ("width", "W"))


def shape_label(params: dict[str, Any]) -> str:
    """'B8 H12 T128 D64 causal flash' for a transformer-shaped case ('' for a sized one)."""
    if params.get("size_mb") is not None:
        return ""
    parts = [f"{short}{params[k]}" for k, short in SHAPE_LABELS if params.get(k) is not None]
    if params.get("causal"):
        parts.append("causal")
    if params.get("op") == "attention":
        parts.append(params.get("backend") or "default")
    return " ".join(parts)


def transformer_rows(points: list[OpsPoint]) -> tuple[list[str], list[list[str]]]:
    """The transformer-shaped cases: per op, shape and variant, framework/device and dtype, the median
    time, FLOP/s, bytes/s and % of the compute peak (repetitions at their median)."""
    header = ["op", "shape", "framework/device", "dtype", "ms", "GFLOP/s", "GB/s", "% FLOP peak"]
    index: dict[tuple[int, float, str, str, str, str], list[OpsPoint]] = {}
    order = {o: i for i, o in enumerate(OP_ORDER)}
    for p in points:
        if p.shape:
            key = (order.get(p.op, 99), p.size_mb, p.shape, p.op, f"{p.framework}/{p.device}", p.dtype)
            index.setdefault(key, []).append(p)
    rows = []
    for (_, _, shape, op, label, dtype), pts in sorted(index.items()):
        ms = _median([p.metrics.median_s for p in pts])
        time_ms = format_number(None if ms is None else ms * 1e3, ".3f") + validity_mark(pts)
        rows.append([op, shape, label, dtype, time_ms,
                     format_number(_median([p.metrics.flops_per_s for p in pts]), scale=1e9),
                     format_number(_median([p.metrics.bytes_per_s for p in pts]), scale=1e9),
                     format_number(_median([p.roof["pct_flop_peak"] for p in pts]), ".2f")])
    return header, rows


#: Row order of dtypes within a size: the study's single precision first.
DTYPE_ORDER = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
#: Study 002's figures are single precision (nvprof flop_count_sp / flop_sp_efficiency).
REFERENCE_DTYPE = "float32"


def study_layout(points: list[OpsPoint], ops: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """Rows (size, framework/device, dtype) x `ops` columns of 'MFlop/s | Efic.%' as in study 002.

    dtype is part of the row: a study with float32 and bfloat16 cases shows both, never one over the
    other. Repetitions of a case (several results) are shown at their median."""
    points = [p for p in points if p.op in ops and not p.shape]  # transformer shapes have their own table
    ops = tuple(o for o in ops if any(p.op == o for p in points))
    header = ["MB", "framework/device", "dtype"] + [f"{o} {h}" for o in ops for h in ("MFlop/s", "Efic.%")]
    index: dict[tuple[float, str, str], dict[str, list[OpsPoint]]] = {}
    for p in points:
        index.setdefault((p.size_mb, p.dtype, f"{p.framework}/{p.device}"), {}).setdefault(p.op, []).append(p)
    rows = []
    for (size, dtype, label), by_op in sorted(index.items(), key=lambda kv: _row_order(*kv[0])):
        row = [f"{size:g}", label, dtype]
        for o in ops:
            pts = by_op.get(o)
            if not pts:
                row += ["-", "-"]
            else:
                mark = validity_mark(pts)
                row += [format_number(_median([p.metrics.flops_per_s for p in pts]), ",.2f", scale=1e6) + mark,
                        format_number(_median([p.roof["pct_flop_peak"] for p in pts]), ".2f")]
        rows.append(row)
    return header, rows


#: The mark a study-layout figure carries when one of its measurements was not valid (worst first).
VALIDITY_MARKS = {"invalid": " (i)", "contended": " (c)", "noisy": " (n)"}
VALIDITY_MARKS_NOTE = ("(c) contended: other work took the CPU while it ran, slower than this machine; (n) noisy; "
                       "(i) invalid measurement. `dlperf show` gives each case's reason")


def validity_mark(points: list[OpsPoint]) -> str:
    """The worst validity among a figure's measurements, as a short mark ('' when all are valid or unknown)."""
    found = {p.metrics.validity for p in points}
    return next((mark for v, mark in VALIDITY_MARKS.items() if v in found), "")


def _row_order(size: float, dtype: str, label: str) -> tuple[float, int, str, str]:
    return size, DTYPE_ORDER.get(dtype, len(DTYPE_ORDER)), dtype, label


def _median(values: list[float | None]) -> float | None:
    """The median of the known values (None where none is known)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _pct(value: float | None, bad: bool) -> str:
    """A percentage; one that cannot be true is never shown plain: it carries a '!'."""
    return format_number(value, ".2f") + (" !" if bad and value is not None else "")


#: Above this spread (ceiling's IQR/median plus the case's, %), a case below the flag line is not called ok.
JUDGE_MAX_SPREAD_PCT = 100.0


def _check(roof: RooflinePoint) -> str:
    """The case's check (`roofline_point`'s: its flag, or ok, or why it was not judged, in the run's own
    validity words); "spread N%: not judged" where the ceiling's spread plus the case's is too large to call
    it ok."""
    if roof["check"] == "ok" and roof["level_bw"] is not None and roof["tolerance_pct"] > JUDGE_MAX_SPREAD_PCT:
        return f"spread {roof['tolerance_pct']:.0f}%: not judged"
    return str(roof["check"])


def roofline_rows(points: list[OpsPoint]) -> tuple[list[str], list[list[str]]]:
    """Per case: dtype, its memory level, AI, FLOP/s, bytes/s, % of the compute peak and of the bandwidth
    ceiling at its working set, % of the attainable, the binding ceiling, the spread and a check."""
    header = ["framework/device", "op", "dtype", "MB", "level", "FLOP/byte", "GFLOP/s", "GB/s", "% FLOP peak",
              "% BW ceiling", "% attainable", "binds", "IQR", "check"]
    rows = []
    order = {o: i for i, o in enumerate(OP_ORDER)}
    for p in sorted(points, key=lambda q: (q.framework, q.device, q.dtype, order.get(q.op, 99), q.size_mb, q.shape)):
        m, r = p.metrics, p.roof
        flag = r["flag"] or ""
        rows.append([
            f"{p.framework}/{p.device}", p.label, p.dtype, f"{p.size_mb:g}", r["level"] or MISSING,
            format_number(m.arithmetic_intensity), format_number(m.flops_per_s, scale=1e9),
            format_number(m.bytes_per_s, scale=1e9),
            _pct(r["pct_flop_peak"], flag == "above compute peak"), _pct(r["pct_bw_peak"], "ceiling" in flag),
            _pct(r["pct_attainable"], bool(flag)), r["binds"] or MISSING, format_iqr(m.iqr_rel), _check(r),
        ])
    return header, rows


def reference_layout(ops: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """Study 002's published figures for `ops`, in the same layout (one row per size and GPU)."""
    data = [r for r in paper.load("study002").rows if r["op"] in ops]
    ops = tuple(o for o in ops if any(r["op"] == o for r in data))
    header = ["MB", "GPU (study 002)", "dtype"] + [f"{o} {h}" for o in ops for h in ("MFlop/s", "Efic.%")]
    index: dict[tuple[float, str], dict[str, dict[str, str]]] = {}
    order = {"GT710M": 0, "K40": 1, "GTX980": 2}
    for r in data:
        size = float(r["size_mb"]) if r["op"] != "dot" else _dot_row_size(float(r["size_mb"]))
        index.setdefault((size, r["device"]), {})[r["op"]] = r
    rows = []
    for (size, gpu), by_op in sorted(index.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        row = [f"{size:g}", gpu, REFERENCE_DTYPE]
        for o in ops:
            r = by_op.get(o)
            row += [f"{float(r['mflops_per_s']):,.2f}", r["efficiency_pct"]] if r else ["-", "-"]
        rows.append(row)
    return header, rows


def reference_efficiency() -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Study 002's efficiency per op and GPU: op -> GPU -> [(size MB, efficiency %)] (dot at its own sizes)."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in paper.load("study002").rows:
        out.setdefault(r["op"], {}).setdefault(r["device"], []).append(
            (float(r["size_mb"]), float(r["efficiency_pct"])))
    return out


def efficiency_figure(points: list[OpsPoint], data: ReportData) -> list[Section]:
    """The study's efficiency curves (dashed) beside this run's float32 ones (solid), per op of the study's
    tables this run has; a line saying so where this run has no GPU case."""
    ref = reference_efficiency()
    panels = {}
    for op in STUDY_OP_ORDER:
        mine: dict[str, list[tuple[float, float]]] = {}
        for p in points:
            if p.op == op and not p.shape and p.dtype == REFERENCE_DTYPE and p.roof["pct_flop_peak"] is not None:
                mine.setdefault(f"{p.framework}/{p.device}", []).append((p.size_mb, p.roof["pct_flop_peak"]))
        if op in ref and mine:
            panels[op] = (ref[op], mine)
    out: list[Section] = []
    if not any(p.device != "cpu" for p in points):
        text = ("this run has no GPU case: study 002's figures are three GPUs' (GT710M, K40, GTX980), so the rows of "
                "this machine above are CPU figures set beside them for scale, not a like-for-like comparison")
        out.append(Note(text, markdown=text[0].upper() + text[1:] + "."))
    paths = efficiency_plot(panels, data.plot_dir, f"study002-efficiency-{data.run.id}")
    if paths:
        out.append(Figure(paths, "study 002 efficiency against size: paper dashed, this run solid",
                          label="efficiency plot (paper dashed, this run solid)"))
    elif not panels:
        out.append(Note("efficiency plot: no float32 case of the study's ops with a known FLOP peak in this run",
                        markdown=""))
    return out


def _dot_row_size(dot_mb: float) -> float:
    """Table 2 prints dot (5, 9, 17, 33, 65 MB) on the rows of add/mul's 6, 12, 24, 48, 96 MB."""
    return {5: 6.0, 9: 12.0, 17: 24.0, 33: 48.0, 65: 96.0}.get(int(dot_mb), dot_mb)


def _gbs(x: float | None) -> str:
    return "unknown" if x is None else f"{x / 1e9:.1f} GB/s"


def ceiling_lines(points: list[OpsPoint]) -> list[str]:
    """Per device: where its ceilings come from, every memory level's ceiling, and the compute peak per dtype."""
    by_device: dict[str, dict[str, Ceilings]] = {}
    for p in points:
        by_device.setdefault(p.device, {})[p.dtype] = p.ceilings
    out = []
    for device, by_dtype in sorted(by_device.items()):
        c = next(iter(by_dtype.values()))
        out.append(f"{device}: {c.origin}")
        out += c.curve.lines(c.reported_levels) if c.curve is not None else []
        for lv in c.levels:
            cap = ("" if lv.capacity_bytes is None or c.curve is not None
                   else f" (holds {format_size(lv.capacity_bytes)} for the run's threads)")
            extra = ""
            if lv.name == DRAM and lv.source != "theoretical bandwidth":
                extra = f"; theoretical {_gbs(c.dram_theoretical)}" if c.dram_theoretical else (
                    f"; {c.dram_theoretical_source}")
            out.append(f"  {lv.name}{cap}: {_gbs(lv.bytes_per_s)} ({lv.source}){extra}")
        for dtype, cd in sorted(by_dtype.items()):
            fp = "unknown" if cd.flop_peak is None else f"{cd.flop_peak / 1e9:.1f} GFLOP/s"
            gemm = "" if cd.gemm_measured is None else (
                f"; measured GEMM {cd.gemm_measured / 1e9:.1f} GFLOP/s ({cd.gemm_source})")
            out.append(f"  compute {dtype}: {fp} ({cd.flop_source}){gemm}")
    return out


OVERRIDES_NOTE = ("DLPERF_* overrides act when a run starts and are stored with it; set when a report is drawn, they "
                  "change nothing: a run is judged against the figures it was measured under")
FLAG_NOTES = {
    "ceiling": ("{n} case(s) above the bandwidth ceiling at their working set by more than the measured spread (the "
                "ceiling's IQR, the case's, the curve's rise between the sizes around it) and "
                f"{100 * ABOVE_TOLERANCE_REL:.0f}%: the ceiling or the cost model is wrong"),
    "no cache sizes": ("{n} case(s) above the DRAM ceiling, and this run stored no cache sizes: their working set "
                       "probably lives in a cache, whose bandwidth exceeds DRAM's"),
    "compute": "{n} case(s) above the compute peak: impossible, so a bug in the peak or in the cost model",
}


def flag_notes(points: list[OpsPoint]) -> list[str]:
    """One line per kind of flag raised, with its meaning."""
    flags = [p.roof["flag"] for p in points if p.roof["flag"]]
    counts = {"compute": sum(f == "above compute peak" for f in flags),
              "no cache sizes": sum(f.endswith("(no cache sizes)") for f in flags)}
    counts["ceiling"] = len(flags) - counts["compute"] - counts["no cache sizes"]
    return [FLAG_NOTES[k].format(n=n) for k, n in counts.items() if n]


def sections(data: ReportData) -> list[Section]:
    """Study 002's layout with its published figures beside it, then the roofline (table, ceilings, plot)."""
    if not data.of("ops"):
        return []
    points = ops_points(data)
    if not points:
        return [Note("no ok ops case to place on a roofline",
                     markdown="## Roofline\n\nNo ok ops case to place on a roofline.")]
    present = {p.op for p in points if not p.shape}
    out: list[Section] = [Heading("## Study 002 layout",
                                  "MFlop/s and Efic. (% of the theoretical FLOP peak) per size, dtype and "
                                  "framework/device, as in the study's Tables 2 and 3, each followed by the study's "
                                  f"own figures (from {REFERENCE_CITATION}).")]
    for name, ops in OP_GROUPS if present else ():
        if not present & set(ops):
            continue
        header, rows = study_layout(points, ops)
        out.append(Table(f"{name} layout, this machine: MFlop/s and Efic. (% of the theoretical FLOP peak)",
                         header, rows, heading=f"### {name}: this machine"))
        if any(m in cell for row in rows for cell in row for m in VALIDITY_MARKS.values()):
            out.append(Note(VALIDITY_MARKS_NOTE))
        if name != "beyond the study":
            out.append(Table(f"{name} as published: study 002, Theano on three GPUs (nvprof)",
                             *reference_layout(ops), heading=f"### {name}: as published"))
    if present:
        out.append(Note(f"reference: {REFERENCE_CITATION}", markdown=""))
        out += efficiency_figure(points, data)
    if any(p.shape for p in points):
        out.append(Table("transformer ops at their shapes (B batch, H heads, T tokens, D head width, W width; "
                         "attention's backend; FLOPs count attention's whole T x T square, causal or not)",
                         *transformer_rows(points), heading="## Transformer ops"))
    notes = flag_notes(points)
    lines = ceiling_lines(points)
    set_now = sorted(name for name in OVERRIDES if os.environ.get(name, "").strip())  # as set: never judged here
    overrides = OVERRIDES_NOTE + (f" (set now: {', '.join(set_now)})" if set_now else "")
    paths = roofline_plot(points, OP_ORDER, data.plot_dir,
                          f"roofline of run {data.run.id} ({len(points)} cases)",
                          stem="roofline-" + path_component(data.run.id))
    if not paths:
        notes = [*notes, "no roofline plot: no case has both a FLOP/s rate and an arithmetic intensity"]
    # Markdown: the heading, the plot, the ceilings, then the table; the terminal: the table, then the rest.
    ceilings_md = ["Ceilings:", "", *[f"  - {line.strip()}" if line.startswith("  ") else f"- {line}"
                                       for line in lines], "", overrides + "."]
    if paths:
        out.append(Figure(paths, "roofline", heading="## Roofline", only="markdown", markdown_notes=ceilings_md))
    else:  # the same place and text, without a plot
        out.append(Heading("## Roofline"))
        out.append(Note("", markdown="\n".join(ceilings_md), terminal=False))
    for note in notes:
        out.append(Note(note, markdown=note + ".", terminal=False))
    out.append(Table("roofline: each case against the ceilings of its memory level and the compute peak",
                     *roofline_rows(points), text_cols=(-1,)))
    for note in notes:
        out.append(Note(note, markdown=""))
    out.append(Figure(paths, "roofline", label="roofline plot", only="terminal",
                      notes=["ceilings:", *[f"  {line}" for line in lines], overrides]))  # no paths: no file named
    curve_paths = bandwidth_curve_plot(points, OP_ORDER, data.plot_dir,
                                       f"bandwidth against working set, run {data.run.id}: the curve measured "
                                       "with the run and every case", stem=f"bandwidth-curve-{data.run.id}")
    if curve_paths:
        out.append(Figure(curve_paths, "bandwidth curve with the cases", label="bandwidth curve plot"))
    return out
