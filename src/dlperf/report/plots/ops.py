"""The ops study's figures: the roofline (FLOP/s against arithmetic intensity, every memory level's ceiling) and
the bandwidth curve (bandwidth against working set, each case at its own working set).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlperf.hardware.bwcurve import envelope
from dlperf.report.plots import MARKERS, _pyplot, log_scale, save_figure
from dlperf.units import format_size


def roofline_plot(points: list[Any], op_order: tuple[str, ...], out_dir: Path, title: str,
                  stem: str = "roofline") -> list[Path]:
    """Log-log FLOP/s against arithmetic intensity: every memory level's ceiling and the compute roof per
    device, each case placed.

    `points` are the ops report's `OpsPoint`s (op, framework, device, size_mb, metrics, ceilings);
    colour is the op (in `op_order`), marker the framework; each op's largest size carries a label.
    Each level's line is min(compute peak, AI x its bandwidth), labelled with the level and its GB/s.
    Returns the written files (STEM.png, STEM.svg; the report names them by run id), or [] and writes
    nothing when no case has both a FLOP/s rate and an arithmetic intensity to place.
    """
    placed = [p for p in points if p.metrics.flops_per_s and p.metrics.arithmetic_intensity]
    if not placed:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 6.5))
    ops = [o for o in op_order if any(p.op == o for p in placed)]
    frameworks = sorted({p.framework for p in placed})
    cmap = plt.get_cmap("tab10")
    ai_all = [p.metrics.arithmetic_intensity for p in placed]
    x_lo, x_hi = min(ai_all) / 4, max(ai_all) * 4

    devices = {}
    for p in placed:
        devices[p.device] = p.ceilings
    blues = plt.get_cmap("Blues")
    for i, (device, c) in enumerate(sorted(devices.items())):
        style = ["-", "--", ":"][i % 3]
        for k, lv in enumerate(c.levels):
            if not lv.bytes_per_s:
                continue
            roof = c.flop_peak or float("inf")
            ridge = roof / lv.bytes_per_s
            xs = [x_lo, min(max(ridge, x_lo), x_hi), x_hi]
            colour = blues(0.95 - 0.55 * k / max(1, len(c.levels) - 1))
            label = f"{device} {lv.name}: {lv.bytes_per_s / 1e9:.0f} GB/s"
            ax.plot(xs, [min(roof, x * lv.bytes_per_s) for x in xs], color=colour, ls=style, lw=1.4, label=label)
            ax.annotate(f"{lv.name} {lv.bytes_per_s / 1e9:.0f} GB/s", (x_lo * 1.15, x_lo * 1.15 * lv.bytes_per_s),
                        xytext=(0, 3), textcoords="offset points", fontsize=7.5, color=colour, rotation=0)
        if c.dram_theoretical and c.dram and c.dram.bytes_per_s != c.dram_theoretical:
            xs = [x_lo, x_hi]
            ax.plot(xs, [x * c.dram_theoretical for x in xs], color="tab:red", ls=":", lw=1,
                    label=f"{device} DRAM theoretical: {c.dram_theoretical / 1e9:.0f} GB/s")
        if c.flop_peak:
            ax.axhline(c.flop_peak, color="k", ls=style, lw=1.6,
                       label=f"{device} compute peak {c.flop_peak / 1e9:.0f} GFLOP/s")
        if c.gemm_measured:
            ax.axhline(c.gemm_measured, color="0.5", ls=style, lw=1,
                       label=f"{device} measured GEMM {c.gemm_measured / 1e9:.0f} GFLOP/s")

    for p in placed:
        ax.scatter(p.metrics.arithmetic_intensity, p.metrics.flops_per_s,
                   color=cmap(ops.index(p.op) % 10), marker=MARKERS[frameworks.index(p.framework) % len(MARKERS)],
                   s=36, alpha=0.85, edgecolors="none")
    for op in ops:  # one label per op, at its largest-size point
        mine = [p for p in placed if p.op == op]
        top = max(mine, key=lambda q: q.size_mb)
        k = ops.index(op)
        ax.annotate(op, (top.metrics.arithmetic_intensity, top.metrics.flops_per_s),
                    xytext=(6, 4 - 11 * (k % 3)),
                    textcoords="offset points", fontsize=9, color=cmap(ops.index(op) % 10))
    for op in ops:
        ax.scatter([], [], color=cmap(ops.index(op) % 10), marker="o", label=f"op: {op}")
    for fw in frameworks:
        ax.scatter([], [], color="0.3", marker=MARKERS[frameworks.index(fw) % len(MARKERS)], label=f"{fw}")
    log_scale(ax, "x")
    log_scale(ax, "y")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte, compulsory traffic)")
    ax.set_ylabel("achieved FLOP/s (median)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7.5, loc="upper left", ncol=2, framealpha=0.9)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem, dpi=130)


def bandwidth_curve_plot(points: list[Any], op_order: tuple[str, ...], out_dir: Path, title: str,
                         stem: str = "bandwidth-curve") -> list[Path]:
    """Log-log bandwidth against working set: the curve each device's run measured (its best rate per
    working set, a bar down by its spread), the envelope cases are judged against (dashed), the plateaus
    found in it (thick, labelled), the reported cache sizes (dotted), and every case placed at its own
    working set (colour: op, marker: framework; red edge: flagged above; hollow: not judged).

    `points` are the ops report's `OpsPoint`s; [] (nothing written) where no run of them has a curve."""
    from matplotlib.ticker import FuncFormatter

    curves = {p.device: p.ceilings for p in points if p.ceilings.curve is not None and p.ceilings.curve.points}
    if not curves:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 6))
    cmap = plt.get_cmap("tab10")
    for i, (device, c) in enumerate(sorted(curves.items())):
        pts = sorted(c.curve.points, key=lambda q: q.working_set_bytes)
        xs, ys = [q.working_set_bytes for q in pts], [q.bytes_per_s / 1e9 for q in pts]
        low = [y * min(q.spread_rel, 0.9) for y, q in zip(ys, pts, strict=True)]
        colour = ("0.15", "tab:brown", "tab:olive")[i % 3]
        ax.errorbar(xs, ys, yerr=[low, [0.0] * len(ys)], color=colour, marker="o", ms=4, lw=1.2, capsize=2,
                    label=f"{device}: best rate per working set (bar: spread)")
        ax.plot(xs, [v / 1e9 for v, _ in envelope(pts)], color=colour, ls="--", lw=1,
                label=f"{device}: ceiling judged against (best at this size or larger)")
        for k, pl in enumerate(c.curve.plateaus):
            ax.plot([pl.start_bytes, pl.end_bytes], [pl.bytes_per_s / 1e9] * 2, color=cmap(k % 10), lw=4, alpha=0.5)
            ax.annotate(f"{pl.name} {pl.bytes_per_s / 1e9:.0f} GB/s", (pl.start_bytes, pl.bytes_per_s / 1e9),
                        xytext=(0, 5), textcoords="offset points", fontsize=8, color=cmap(k % 10))
        for name, capacity in c.reported_levels:
            if capacity:
                ax.axvline(capacity, color="0.6", ls=":", lw=1)
                ax.annotate(f"{name} {format_size(capacity)}", (capacity, 1), xycoords=("data", "axes fraction"),
                            xytext=(2, -12), textcoords="offset points", fontsize=7, color="0.4", rotation=90,
                            va="top")
    ops = [o for o in op_order if any(p.op == o for p in points)]
    frameworks = sorted({p.framework for p in points})
    for p in points:
        ws, rate = p.metrics.bytes_per_call, p.metrics.bytes_per_s
        if not ws or not rate or p.device not in curves or p.op not in ops:
            continue
        colour = cmap(ops.index(p.op) % 10)
        judged = "not judged" not in p.roof["check"] and "too noisy" not in p.roof["check"]
        ax.scatter(ws, rate / 1e9, marker=MARKERS[frameworks.index(p.framework) % len(MARKERS)], s=40,
                   facecolors=colour if judged else "none", edgecolors="red" if p.roof["flag"] else colour,
                   linewidths=1.6 if p.roof["flag"] else 1.0, zorder=3)
    for op in ops:
        ax.scatter([], [], color=cmap(ops.index(op) % 10), marker="o", label=f"op: {op}")
    for fw in frameworks:
        ax.scatter([], [], color="0.3", marker=MARKERS[frameworks.index(fw) % len(MARKERS)], label=fw)
    ax.scatter([], [], facecolors="none", edgecolors="0.3", label="not judged (validity or noisy ceiling)")
    log_scale(ax, "x", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(x)))
    log_scale(ax, "y")
    ax.set_xlabel("working set (the arrays touched; dotted: cache sizes the machine reports)")
    ax.set_ylabel("bandwidth, GB/s")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7.5, loc="lower left", ncol=2, framealpha=0.9)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem, dpi=130)
