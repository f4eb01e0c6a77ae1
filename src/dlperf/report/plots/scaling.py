"""The plots of the ddp and collectives reports (PNG and SVG through `plots.save_figure`, matplotlib's Agg).

- `scaling_plot`: data-parallel training against world size, a row per scaling series: samples/s with the ideal
  line (N x samples/s at world size 1, dashed) on the left, scaling efficiency with the ideal 100% on the right.
- `busbw_plot`: collectives' bus bandwidth (GB/s, decimal) against message size (log x, binary sizes), a panel per
  backend/device and world size, a line per operation.
Each takes plain data (the report builds it) and the folder to write to, and returns the files it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from dlperf.report.plots import _pyplot, line_styles, log_scale, panel_grid, save_figure
from dlperf.units import GB_BYTES, format_size


class ScalingPanel(TypedDict):
    """One ddp series: its sample unit ("image", "token", ...), (world size, samples/s, efficiency or None) per
    world size that ran, and the samples/s at world size 1 (None where none ran)."""

    unit: str
    points: list[tuple[int, float, float | None]]
    base: float | None


def scaling_plot(panels: dict[str, ScalingPanel], out_dir: Path, stem: str = "ddp-scaling") -> list[Path]:
    """`panels`: series label -> {"unit": "image"|"token"|..., "points": [(world size, samples/s, efficiency or
    None)], "base": samples/s at world size 1 or None}. Without a base, no ideal line and no efficiency points:
    the efficiency panel says why."""
    panels = {k: v for k, v in panels.items() if v["points"]}
    if not panels:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 2, figsize=(13, 4.6 * len(panels)), squeeze=False)
    for (left, right), (label, panel) in zip(axes, panels.items(), strict=True):
        pts = sorted(panel["points"])
        ns = [p[0] for p in pts]
        unit = f"{panel['unit']}s/s"
        left.plot(ns, [p[1] for p in pts], "o-", color="C0", label=f"measured {unit}")
        base = panel.get("base")
        span = sorted({1, *ns})
        if base:
            left.plot(span, [n * base for n in span], "--", color="0.4", label="ideal: N x world size 1")
        left.set_ylabel(f"{unit} (global, from the median step)")
        left.set_title(label, fontsize=10)
        eff = [(p[0], p[2]) for p in pts if p[2] is not None]
        if eff:
            right.plot([e[0] for e in eff], [100 * e[1] for e in eff], "s-", color="C1", label="efficiency")
            right.axhline(100, color="0.4", ls="--", lw=1, label="ideal 100%")
            right.set_ylim(0, max(110, 10 + max(100 * e[1] for e in eff)))
        else:
            right.text(0.5, 0.5, "no efficiency: no world size 1 case ran in this series", ha="center",
                       va="center", transform=right.transAxes, fontsize=9, color="0.4")
        right.set_ylabel("scaling efficiency (%): samples/s(N) / (N x samples/s(1))")
        right.set_title(f"{label}: efficiency", fontsize=10)
        for ax in (left, right):
            log_scale(ax, "x", base=2)
            ax.set_xticks(span, [str(n) for n in span])
            ax.set_xlabel("world size (ranks)")
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def busbw_plot(panels: dict[str, dict[str, list[tuple[int, float]]]], out_dir: Path,
               stem: str = "collectives-busbw") -> list[Path]:
    """`panels`: panel title -> {line label: [(message size S in bytes, busbw bytes/s)]}; log x, GB/s = 1e9 B/s."""
    panels = {k: v for k, v in panels.items() if any(v.values())}
    if not panels:
        return []
    fig, axes = panel_grid(len(panels))
    style = line_styles(label for lines in panels.values() for label in lines)
    for ax, (title, lines) in zip(axes.flat, panels.items(), strict=False):
        sizes: set[int] = set()
        for label, points in sorted(lines.items()):
            pts = sorted(points)
            if not pts:
                continue
            colour, marker = style[label]
            ax.plot([p[0] for p in pts], [p[1] / GB_BYTES for p in pts], "-", color=colour, marker=marker,
                    label=label)
            sizes |= {p[0] for p in pts}
        log_scale(ax, "x", base=2)
        ticks = sorted(sizes)
        if len(ticks) <= 12:
            ax.set_xticks(ticks, [format_size(s) for s in ticks], rotation=30, ha="right", fontsize=8)
        ax.set_xlabel("message size S (nccl-tests' definition; binary units)")
        ax.set_ylabel("bus bandwidth (GB/s, 1 GB = 1e9 bytes; median time)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)
