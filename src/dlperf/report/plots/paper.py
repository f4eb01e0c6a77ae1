"""Plots that set a seed study's published figures beside this run's, the paper's always marked as such
(hatched bars, dashed lines, "paper:" in every label), drawn with report.plots' matplotlib and save_figure.

Only figures a seed prints as numbers are drawn (studies/reference/*.csv); a result it shows only as a
picture is never redrawn from guesses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from dlperf.report.plots import _pyplot, log_scale, save_figure


def speedup_plot(points: Sequence[tuple[str, float | None, float | None]], out_dir: Path, stem: str) -> list[Path]:
    """Study 003's speedups: per pair, the paper's bar (hatched) beside this run's (solid), log scale.

    `points`: (label, paper's speedup or None, this run's or None). Nothing to draw (no figure on either
    side): no file. A missing bar is labelled "not in this run" / "not in the paper" at the axis."""
    shown = [p for p in points if p[1] is not None or p[2] is not None]
    if not shown:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(shown) + 1.6))
    height = 0.38
    known = [v for _, a, b in shown for v in (a, b) if v]
    lo, hi = min(known + [1.0]) / 3, max(known + [1.0]) * 3
    hatched = {"hatch": "//", "facecolor": "white", "edgecolor": "tab:gray"}
    for i, (_label, theirs, mine) in enumerate(shown):
        y = len(shown) - 1 - i
        for off, value, kw, name in ((height / 2, theirs, hatched, "paper"),
                                     (-height / 2, mine, {"color": "tab:blue"}, "this run")):
            if value:
                ax.barh(y + off, value, height=height, left=0, **kw)
                ax.annotate(f"{name}: {value:.3g}", (value, y + off), xytext=(3, -3), textcoords="offset points",
                            fontsize=8)
            else:
                ax.annotate(f"{name}: not {'printed' if name == 'paper' else 'in this run'}", (lo * 1.1, y + off),
                            xytext=(2, -3), textcoords="offset points", fontsize=8, color="0.45")
    log_scale(ax, "x")
    ax.set_xlim(lo, hi * 3)
    ax.set_ylim(-0.75, len(shown) - 0.25)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(range(len(shown)), [p[0] for p in reversed(shown)], fontsize=8)
    ax.set_xlabel("speedup = time of a / time of b (log; right of 1: b is faster)")
    ax.set_title("study 003 speedups: paper (hatched, Figures 5(b) and 6) and this run (solid)", fontsize=10)
    ax.grid(True, axis="x", which="both", alpha=0.25)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


Series = dict[str, list[tuple[float, float]]]


def efficiency_plot(panels: dict[str, tuple[Series, Series]], out_dir: Path, stem: str) -> list[Path]:
    """Study 002: % of the theoretical FLOP peak against data size, one panel per op; in each, the paper's
    GPUs dashed with hollow markers (Tables 2 and 3) and this run's framework/device solid.

    `panels`: op -> (paper's series, this run's series), each label -> [(size MB, efficiency %)].
    Returns [] when no panel has a point."""
    panels = {op: sides for op, sides in panels.items() if any(pts for side in sides for pts in side.values())}
    if not panels:
        return []
    plt = _pyplot()
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows + 0.6), squeeze=False)
    for ax, (op, (theirs, mine)) in zip(axes.flat, panels.items(), strict=False):
        for label, pts in sorted(theirs.items()):
            if pts:
                xs, ys = zip(*sorted(pts), strict=True)
                ax.plot(xs, ys, "--", marker="s", markerfacecolor="white", lw=1, label=f"paper: {label}")
        for label, pts in sorted(mine.items()):
            if pts:
                xs, ys = zip(*sorted(pts), strict=True)
                ax.plot(xs, ys, "-", marker="o", lw=1.6, label=f"this run: {label}")
        log_scale(ax, "x", base=2)
        log_scale(ax, "y")
        ax.set_title(op, fontsize=10)
        ax.set_xlabel("MB", fontsize=8)
        ax.set_ylabel("% of FLOP peak", fontsize=8)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=6.5)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("study 002: efficiency against size, the paper's GPUs (dashed, Tables 2 and 3) and this run "
                 "(solid)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)
