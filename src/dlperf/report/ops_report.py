"""The `ops` study's report: study 002's own layout (size x device rows, op columns, MFlop/s and
efficiency), the study's published figures beside it, and the roofline of every case."""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.core.result import Metrics
from dlperf.hardware.roofline import Ceilings, ceilings, roofline_point
from dlperf.report.plots import roofline_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_iqr, format_number

REFERENCE_CSV = Path(__file__).resolve().parents[1] / "studies" / "reference" / "study002.csv"
REFERENCE_CITATION = ("study 002 (shared/seeds/002_193418cc60d7ad6c.txt): Theano on GT710M, K40 and GTX980 under "
                      "nvprof, Tables 2 and 3; efficiency = flop_sp_efficiency")
STUDY_OP_ORDER = ("add", "mul", "dot", "scalar", "sigmoid", "tanh", "relu", "softmax", "conv2d")
#: The study's own grouping: Table 2, Table 3, and dlperf's additions.
OP_GROUPS = (("Table 2", ("add", "mul", "dot")), ("Table 3", ("scalar", "sigmoid", "tanh")),
             ("beyond the study", ("relu", "softmax", "conv2d")))


@dataclass
class OpsPoint:
    """One ok case of an ops run, with its roofline figures."""

    framework: str
    device: str
    op: str
    size_mb: float
    dtype: str
    metrics: Metrics
    roof: dict[str, Any]
    ceilings: Ceilings


def ops_points(data: ReportData) -> list[OpsPoint]:
    """Roofline figures of every ok case (rates from the median; see hardware.roofline)."""
    measured, peaks_run = data.measured_peaks
    points = []
    for r in data.of("ops"):
        if not r.ok:
            continue
        p = r.params
        c = ceilings(data.env, r.device, p["dtype"], measured, peaks_run)
        points.append(OpsPoint(r.framework, r.device, p["op"], float(p["size_mb"]), p["dtype"], r.m,
                               roofline_point(r.m.as_dict(), c), c))
    return points


#: Row order of dtypes within a size: the study's single precision first.
DTYPE_ORDER = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
#: Study 002's figures are single precision (nvprof flop_count_sp / flop_sp_efficiency).
REFERENCE_DTYPE = "float32"


def study_layout(points: list[OpsPoint], ops: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """Rows (size, framework/device, dtype) x `ops` columns of 'MFlop/s | Efic.%' as in study 002.

    dtype is part of the row: a study with float32 and bfloat16 cases shows both, never one over the
    other. Repetitions of a case (several results) are shown at their median."""
    ops = tuple(o for o in ops if any(p.op == o for p in points))
    points = [p for p in points if p.op in ops]
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
                row += [format_number(_median([p.metrics.flops_per_s for p in pts]), ",.2f", scale=1e6),
                        format_number(_median([p.roof["pct_flop_peak"] for p in pts]), ".2f")]
        rows.append(row)
    return header, rows


def _row_order(size: float, dtype: str, label: str) -> tuple[float, int, str, str]:
    return size, DTYPE_ORDER.get(dtype, len(DTYPE_ORDER)), dtype, label


def _median(values: list[float | None]) -> float | None:
    """The median of the known values (None where none is known)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def roofline_rows(points: list[OpsPoint]) -> tuple[list[str], list[list[str]]]:
    """Per case: AI, FLOP/s, bytes/s, both efficiencies, attainable, % of it, the binding ceiling."""
    header = ["framework/device", "op", "MB", "FLOP/byte", "GFLOP/s", "GB/s", "% FLOP peak", "% BW peak",
              "attainable GFLOP/s", "% attainable", "binds", "IQR"]
    rows = []
    for p in sorted(points, key=lambda q: (q.framework, q.device, STUDY_OP_ORDER.index(q.op), q.size_mb)):
        m, r = p.metrics, p.roof
        rows.append([
            f"{p.framework}/{p.device}", p.op, f"{p.size_mb:g}",
            format_number(m.arithmetic_intensity), format_number(m.flops_per_s, scale=1e9),
            format_number(m.bytes_per_s, scale=1e9),
            format_number(r["pct_flop_peak"], ".2f"), format_number(r["pct_bw_peak"], ".2f"),
            format_number(r["attainable_flops_per_s"], scale=1e9),
            format_number(r["pct_attainable"], ".2f"), r["binds"] or MISSING, format_iqr(m.iqr_rel),
        ])
    return header, rows


def reference_layout(ops: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """Study 002's published figures for `ops`, in the same layout (one row per size and GPU)."""
    with REFERENCE_CSV.open() as f:
        data = [r for r in csv.DictReader(line for line in f if not line.startswith("#")) if r["op"] in ops]
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


def _dot_row_size(dot_mb: float) -> float:
    """Table 2 prints dot (5, 9, 17, 33, 65 MB) on the rows of add/mul's 6, 12, 24, 48, 96 MB."""
    return {5: 6.0, 9: 12.0, 17: 24.0, 33: 48.0, 65: 96.0}.get(int(dot_mb), dot_mb)


def ceiling_lines(points: list[OpsPoint]) -> list[str]:
    seen = {}
    for p in points:
        seen[(p.device, p.dtype)] = p.ceilings
    out = []
    for (device, dtype), c in sorted(seen.items()):
        fp = "unknown" if c.flop_peak is None else f"{c.flop_peak / 1e9:.1f} GFLOP/s"
        bw = "unknown" if c.bw_peak is None else f"{c.bw_peak / 1e9:.1f} GB/s"
        gemm = "" if c.gemm_measured is None else f"; measured GEMM {c.gemm_measured / 1e9:.1f} GFLOP/s"
        out.append(f"{device} {dtype}: compute {fp} ({c.flop_source}); memory {bw} ({c.bw_source}){gemm}")
    return out


ABOVE_ROOF = ("{n} case(s) run above the roofline (>100% of attainable): their working set fits in cache, whose "
              "bandwidth exceeds the measured DRAM copy ceiling")


def sections(data: ReportData) -> list[Section]:
    """Study 002's layout with its published figures beside it, then the roofline (table, ceilings, plot)."""
    if not data.of("ops"):
        return []
    points = ops_points(data)
    if not points:
        return [Note("no ok ops case to place on a roofline",
                     markdown="## Roofline\n\nNo ok ops case to place on a roofline.")]
    present = {p.op for p in points}
    out: list[Section] = [Heading("## Study 002 layout",
                                  "MFlop/s and Efic. (% of the theoretical FLOP peak) per size, dtype and "
                                  "framework/device, as in the study's Tables 2 and 3, each followed by the study's "
                                  f"own figures (from {REFERENCE_CITATION}).")]
    for name, ops in OP_GROUPS:
        if not present & set(ops):
            continue
        out.append(Table(f"{name} layout, this machine: MFlop/s and Efic. (% of the theoretical FLOP peak)",
                         *study_layout(points, ops), heading=f"### {name}: this machine"))
        if name != "beyond the study":
            out.append(Table(f"{name} as published: study 002, Theano on three GPUs (nvprof)",
                             *reference_layout(ops), heading=f"### {name}: as published"))
    out.append(Note(f"reference: {REFERENCE_CITATION}", markdown=""))
    above = [p for p in points if (p.roof["pct_attainable"] or 0) > 100]
    above_text = ABOVE_ROOF.format(n=len(above)) if above else None
    paths = roofline_plot(points, STUDY_OP_ORDER, data.plot_dir,
                          f"roofline of run {data.run['id']} ({len(points)} cases)")
    # Markdown: the heading, the plot, the ceilings, then the table; the terminal: the table, then the rest.
    out.append(Figure(paths, "roofline", heading="## Roofline", only="markdown",
                      markdown_notes=["Ceilings:", "", *[f"- {line}" for line in ceiling_lines(points)], ""]))
    if above_text:
        out.append(Note(above_text, markdown=above_text + ".", terminal=False))
    out.append(Table("roofline: each case against the ceiling that binds it", *roofline_rows(points)))
    if above_text:
        out.append(Note(above_text, markdown=""))
    out.append(Figure(paths, "roofline", label="roofline plot", only="terminal",
                      notes=["ceilings:", *[f"  {line}" for line in ceiling_lines(points)]]))
    return out
