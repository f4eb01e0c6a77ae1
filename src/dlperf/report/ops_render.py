"""Render an ops run's report sections (terminal or Markdown) and write its roofline plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from dlperf.report.ops_report import (
    OP_GROUPS,
    REFERENCE_CITATION,
    ceiling_lines,
    ops_points,
    reference_layout,
    roofline_rows,
    study_layout,
)
from dlperf.report.plots import roofline_plot
from dlperf.report.readers import peaks_runs
from dlperf.report.tables import markdown_table, rich_table


def build_sections(store: Any, run: dict[str, Any], env: dict[str, Any], results: list[dict[str, Any]],
                   plot_dir: Path) -> dict[str, Any]:
    points, peaks_run = ops_points(peaks_runs(store, [env]), env, results)
    sections: dict[str, Any] = {"points": points, "peaks_run": peaks_run, "plots": []}
    if not points:
        return sections
    present = {p.op for p in points}
    sections["groups"] = [
        (name, study_layout(points, ops), reference_layout(ops) if name != "beyond the study" else None)
        for name, ops in OP_GROUPS if present & set(ops)
    ]
    sections["roofline"] = roofline_rows(points)
    sections["ceilings"] = ceiling_lines(points)
    sections["plots"] = roofline_plot(points, plot_dir, f"roofline of run {run['id']} ({len(points)} cases)")
    return sections


def render_terminal(sections: dict[str, Any], console: Console) -> None:
    if not sections["points"]:
        console.print("no ok ops case to place on a roofline")
        return
    for name, layout, reference in sections["groups"]:
        console.print(rich_table(f"{name} layout, this machine: MFlop/s and Efic. (% of the theoretical FLOP peak)",
                                 *layout))
        if reference is not None:
            console.print(rich_table(f"{name} as published: study 002, Theano on three GPUs (nvprof)", *reference))
    console.print(escape(f"reference: {REFERENCE_CITATION}"), highlight=False)
    console.print(rich_table("roofline: each case against the ceiling that binds it", *sections["roofline"]))
    above = [p for p in sections["points"] if (p.roof["pct_attainable"] or 0) > 100]
    if above:
        console.print(f"{len(above)} case(s) run above the roofline (>100% of attainable): their working set "
                      "fits in cache, whose bandwidth exceeds the measured DRAM copy ceiling", highlight=False)
    console.print("ceilings:", highlight=False)
    for line in sections["ceilings"]:
        console.print(escape(f"  {line}"), highlight=False)
    for path in sections["plots"]:
        console.print(escape(f"roofline plot: {path}"), highlight=False)


def render_markdown(sections: dict[str, Any], plot_dir: Path, md_dir: Path | None) -> str:
    if not sections["points"]:
        return "\n## Roofline\n\nNo ok ops case to place on a roofline.\n"
    png = sections["plots"][0]
    link = Path(_relative(png, md_dir)) if md_dir else png
    out = ["", "## Study 002 layout", "",
           "MFlop/s and Efic. (% of the theoretical FLOP peak) per size and framework/device, as in the study's "
           f"Tables 2 and 3, each followed by the study's own figures (from {REFERENCE_CITATION}).", ""]
    for name, layout, reference in sections["groups"]:
        out += [f"### {name}: this machine", "", markdown_table(*layout)]
        if reference is not None:
            out += [f"### {name}: as published", "", markdown_table(*reference)]
    out += ["## Roofline", "", f"![roofline]({link})", "", "Ceilings:", ""]
    out += [f"- {line}" for line in sections["ceilings"]]
    above = [p for p in sections["points"] if (p.roof["pct_attainable"] or 0) > 100]
    if above:
        out += ["", f"{len(above)} case(s) run above the roofline (>100% of attainable): their working set fits in "
                "cache, whose bandwidth exceeds the measured DRAM copy ceiling."]
    out += ["", markdown_table(*sections["roofline"])]
    return "\n".join(out)


def _relative(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path.resolve(), start.resolve())
