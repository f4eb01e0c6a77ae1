"""The plots of the serving and inference reports (PNG and SVG through `plots.save_figure`, matplotlib's Agg).

- `search_plot`: the Server rate search: p99 latency against offered load, a panel per served model, a line per
  framework/runtime (a colour each), the latency bound dashed, VALID probes as dots and INVALID ones as crosses.
- `latency_batch_plot`: inference latency per call against batch size, a panel per model, a line per
  framework/runtime (one colour and marker in every panel), the 95% interval of the median as error bars.
Each takes plain data (the report builds it) and the folder to write to, and returns the files it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from dlperf.report.plots import line_styles, log_scale, panel_grid, save_figure
from dlperf.report.serving_cells import SHORTENED


class SearchPanel(TypedDict):
    """One served model's Server rate searches: the latency bounds (s), per framework/runtime line its probes
    (offered samples/s, p99 s, VALID?), the probes not drawn (a figure missing), and whether any search was
    shortened below MLPerf's rules."""

    bounds: list[float]
    lines: dict[str, list[tuple[float, float, bool]]]
    undrawn: int
    shortened: bool


def search_plot(panels: dict[str, SearchPanel], out_dir: Path, stem: str = "serving-server-search") -> list[Path]:
    """`panels`: model -> {"bounds": [seconds], "lines": {label: [(offered samples/s, p99 s, valid)]}, "shortened":
    bool}; a panel whose runs were shortened below MLPerf's rules says so in its title."""
    panels = {k: v for k, v in panels.items() if v["lines"]}
    if not panels:
        return []
    fig, axes = panel_grid(len(panels))
    for ax, (model, panel) in zip(axes.flat, panels.items(), strict=False):
        for label, probes in panel["lines"].items():
            pts = sorted(probes)
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", alpha=0.5, label=label)
            colour = line.get_color()
            valid = [p for p in pts if p[2]]
            invalid = [p for p in pts if not p[2]]
            if valid:
                ax.scatter([p[0] for p in valid], [p[1] for p in valid], marker="o", color=colour, zorder=3)
            if invalid:
                ax.scatter([p[0] for p in invalid], [p[1] for p in invalid], marker="x", s=50, color=colour,
                           zorder=3)
        for b in panel["bounds"]:
            ax.axhline(b, color="tab:red", linestyle="--", linewidth=1.2, label=f"latency bound {b * 1e3:g} ms")
        ax.scatter([], [], marker="o", color="0.3", label="VALID probe")
        ax.scatter([], [], marker="x", color="0.3", label="INVALID probe")
        log_scale(ax, "y")
        ax.set_xlabel("offered load (samples/s, Poisson arrivals)")
        ax.set_ylabel("p99 latency (s, LoadGen)")
        ax.set_title(f"Server: {model}" + (f" ({SHORTENED})" if panel.get("shortened") else ""), fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def latency_batch_plot(panels: dict[str, list[tuple[str, list[tuple[int, float, float | None, float | None]]]]],
                       out_dir: Path, stem: str = "inference-latency-per-batch") -> list[Path]:
    """`panels`: model -> [(label, [(batch, median s, 95% low s or None, 95% high s or None)])]; log-log."""
    panels = {k: v for k, v in panels.items() if any(pts for _, pts in v)}
    if not panels:
        return []
    fig, axes = panel_grid(len(panels))
    style = line_styles(label for series in panels.values() for label, _ in series)  # one per series
    for ax, (model, series) in zip(axes.flat, panels.items(), strict=False):
        for label, points in series:
            pts = sorted(points)
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            low = [y - (p[2] if p[2] is not None else y) for y, p in zip(ys, pts, strict=True)]
            high = [(p[3] if p[3] is not None else y) - y for y, p in zip(ys, pts, strict=True)]
            colour, marker = style[label]
            ax.errorbar(xs, ys, yerr=[low, high], color=colour, marker=marker, capsize=3, label=label)
        log_scale(ax, "x", base=2)
        log_scale(ax, "y")
        ax.set_xlabel("batch size (samples per call)")
        ax.set_ylabel("latency per call (s, median; bars: its 95% interval)")
        ax.set_title(f"inference: {model}", fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)
