"""Plots people would rather look at than read: the roofline of an ops run (PNG and SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlperf.report.ops_report import STUDY_OP_ORDER, OpsPoint

_MARKERS = "osD^v<>Pp*Xh"


def save_figure(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    """Write `fig` as STEM.png and STEM.svg under out_dir (created), close it, return the paths."""
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths


def roofline_plot(points: list[OpsPoint], out_dir: Path, title: str) -> list[Path]:
    """Log-log FLOP/s against arithmetic intensity: both ceilings per device, each case placed.

    Colour is the op, marker the framework; each op's largest size carries a label.
    Returns the written files (roofline.png, roofline.svg).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    placed = [p for p in points if p.metrics.get("flops_per_s") and p.metrics.get("arithmetic_intensity")]
    if not placed:
        raise ValueError("no case has both FLOP/s and an arithmetic intensity to place")
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(10, 6.5))
    ops = [o for o in STUDY_OP_ORDER if any(p.op == o for p in placed)]
    frameworks = sorted({p.framework for p in placed})
    cmap = plt.get_cmap("tab10")
    ai_all = [p.metrics["arithmetic_intensity"] for p in placed]
    x_lo, x_hi = min(ai_all) / 4, max(ai_all) * 4

    devices = {}
    for p in placed:
        devices[p.device] = p.ceilings
    for i, (device, c) in enumerate(sorted(devices.items())):
        style = ["-", "--", ":"][i % 3]
        if c.flop_peak and c.bw_peak:
            ridge = c.flop_peak / c.bw_peak
            xs = [x_lo, min(max(ridge, x_lo), x_hi), x_hi]
            ax.plot(xs, [min(c.flop_peak, x * c.bw_peak) for x in xs], "k" + style, lw=1.6,
                    label=f"{device} roofline: {c.bw_peak / 1e9:.0f} GB/s, {c.flop_peak / 1e9:.0f} GFLOP/s")
        elif c.flop_peak:
            ax.axhline(c.flop_peak, color="k", ls=style, lw=1.2, label=f"{device} FLOP peak")
        if c.gemm_measured:
            ax.axhline(c.gemm_measured, color="0.5", ls=style, lw=1,
                       label=f"{device} measured GEMM {c.gemm_measured / 1e9:.0f} GFLOP/s")

    for p in placed:
        ax.scatter(p.metrics["arithmetic_intensity"], p.metrics["flops_per_s"],
                   color=cmap(ops.index(p.op) % 10), marker=_MARKERS[frameworks.index(p.framework) % len(_MARKERS)],
                   s=36, alpha=0.85, edgecolors="none")
    for op in ops:  # one label per op, at its largest-size point
        mine = [p for p in placed if p.op == op]
        top = max(mine, key=lambda q: q.size_mb)
        k = ops.index(op)
        ax.annotate(op, (top.metrics["arithmetic_intensity"], top.metrics["flops_per_s"]),
                    xytext=(6, 4 - 11 * (k % 3)),
                    textcoords="offset points", fontsize=9, color=cmap(ops.index(op) % 10))
    for op in ops:
        ax.scatter([], [], color=cmap(ops.index(op) % 10), marker="o", label=f"op: {op}")
    for fw in frameworks:
        ax.scatter([], [], color="0.3", marker=_MARKERS[frameworks.index(fw) % len(_MARKERS)], label=f"{fw}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, compulsory traffic)")
    ax.set_ylabel("achieved FLOP/s (median)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7.5, loc="upper left", ncol=2, framealpha=0.9)
    fig.tight_layout()
    paths = [out_dir / "roofline.png", out_dir / "roofline.svg"]
    fig.savefig(paths[0], dpi=130)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths
