"""Every plot dlperf draws, in one place: the ops roofline, study 001's Figure 1, the transformer study's
tokens/s and TTFT/TPOT tails, the maxbatch memory
curve and recommend's price/throughput figure (PNG and SVG, matplotlib's Agg backend, no screen).

Each function takes plain data (the report builds it) and the folder to write to, and returns the
files it wrote.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.errors import DlperfError
from dlperf.untrusted import path_component

if TYPE_CHECKING:
    from dlperf.hardware.recommend import Estimate

_MARKERS = "osD^v<>Pp*Xh"


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (imported on first use: `dlperf --help` stays fast)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panel_grid(n: int) -> tuple[Any, Any]:
    """A figure with `n` panels in a grid of at most two columns (7.5 x 5.2 inches each), the spare panel hidden."""
    plt = _pyplot()
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 5.2 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def line_styles(labels: Any) -> dict[str, tuple[str, str]]:
    """One (colour, marker) per label, in sorted order: the same series looks the same in every panel."""
    return {label: (f"C{i % 10}", _MARKERS[i % len(_MARKERS)]) for i, label in enumerate(sorted(set(labels)))}


def save_figure(fig: Any, out_dir: Path, stem: str, dpi: int = 120,
                formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write `fig` as STEM.png and STEM.svg (or the given `formats`) under out_dir (created), close it, return
    the paths. SVG text stays text (svg.fonttype none: small, searchable, inlined as is by the HTML report).
    A folder that cannot be written is the user's to fix: one line (DlperfError), not a traceback."""
    plt = _pyplot()
    paths = [out_dir / f"{path_component(stem, 200)}.{fmt}" for fmt in formats]  # data may name it
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for p in paths:
            written.append(p)
            with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": stem}):  # ids from content, not random
                fig.savefig(p, dpi=dpi, metadata={"Date": None} if p.suffix == ".svg" else None)
    except OSError as exc:
        from dlperf.store.failures import os_error

        if written:
            written[-1].unlink(missing_ok=True)  # the plot cut short (a full disk): never left half-written
        raise os_error(exc, f"{out_dir}: plots") or DlperfError(
            f"{out_dir}: cannot write plots ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
    return paths


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
                   color=cmap(ops.index(p.op) % 10), marker=_MARKERS[frameworks.index(p.framework) % len(_MARKERS)],
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
    return save_figure(fig, out_dir, stem, dpi=130)


def time_per_image_plot(series: list[tuple[str, list[tuple[int, float]], bool]], out_dir: Path) -> list[Path]:
    """Figure 1 of study 001: seconds per image against batch size, log-log, a line per series.

    `series`: (label, [(batch, seconds per image)], solid) per line; solid for a CPU, dashed for a GPU;
    repetitions at one batch are drawn at their median.
    """
    if not series:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    for label, points, solid in series:
        merged: dict[int, list[float]] = defaultdict(list)
        for b, t in points:
            merged[b].append(t)
        xs = sorted(merged)
        ax.plot(xs, [statistics.median(merged[b]) for b in xs], "-" if solid else "--", marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (images per step)")
    ax.set_ylabel("seconds per image (training step / batch)")
    ax.set_title("CNN training: time per image against batch size (study 001, Figure 1)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, "cnn-time-per-image")


def memory_plot(fits: list[tuple[int, float]], failed: list[tuple[int, float]], title: str,
                out_dir: Path, axis_label: str = "batch") -> list[Path]:
    """`dlperf maxbatch`'s figure: peak memory (MiB) against the searched axis (`axis_label`, e.g. batch),
    out-of-memory probes marked."""
    if not fits and not failed:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    if fits:
        ax.plot(*zip(*sorted(fits), strict=True), "o-", label="fits")
    if failed:
        ax.plot(*zip(*sorted(failed), strict=True), "x", color="red", markersize=10,
                label="out of memory (peak before failing)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size" if axis_label == "batch" else axis_label)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, out_dir, "maxbatch-memory")


def recommend_plot(ranked: list[Estimate], others: list[Estimate], out_dir: Path, stem: str,
                   title: str, budget_usd: float | None = None, target_ips: float | None = None,
                   samples: str = "images") -> list[Path]:
    """Log-log estimated `samples`/s against launch price: qualifying devices filled and named, the rest
    hollow; devices without a price are left off (said in the caption). Returns the written files."""
    plt = _pyplot()

    def priced(ests: list[Estimate]) -> list[Estimate]:
        return [e for e in ests if e["device"].value("launch_price_usd") and e.get("images_per_s")]

    shown, grey = priced(ranked), priced(others)
    if not shown and not grey:
        raise ValueError("no device has both a launch price and an estimate to place")
    fig, ax = plt.subplots(figsize=(9, 6))
    colours = {"gpu": "tab:green", "cpu": "tab:blue", "soc": "tab:orange", "accelerator": "tab:purple"}
    for e in grey:
        d = e["device"]
        ax.scatter(d.value("launch_price_usd"), e["images_per_s"], s=40, facecolors="none",
                   edgecolors=colours.get(d.kind, "0.4"), alpha=0.7)
        ax.annotate(d.id, (d.value("launch_price_usd"), e["images_per_s"]), xytext=(4, -9),
                    textcoords="offset points", fontsize=7, color="0.55")
    for e in shown:
        d = e["device"]
        ax.scatter(d.value("launch_price_usd"), e["images_per_s"], s=55, color=colours.get(d.kind, "0.2"))
        ax.annotate(f"#{e['rank']} {d.id}", (d.value("launch_price_usd"), e["images_per_s"]), xytext=(5, 3),
                    textcoords="offset points", fontsize=8)
    for kind, colour in colours.items():
        if any(e["device"].kind == kind for e in shown + grey):
            ax.scatter([], [], color=colour, label=kind)
    ax.scatter([], [], facecolors="none", edgecolors="0.4", label="left out (reason in the table)")
    if budget_usd:
        ax.axvline(budget_usd, color="tab:red", ls="--", lw=1, label=f"budget ${budget_usd:,.0f}")
    if target_ips:
        ax.axhline(target_ips, color="tab:red", ls=":", lw=1, label=f"target {target_ips:,.0f} {samples}/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("launch price, USD (catalog)")
    ax.set_ylabel(f"ESTIMATED {samples}/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    n_off = len(ranked) + len(others) - len(shown) - len(grey)
    fig.text(0.01, 0.01, f"estimates (roofline x efficiency); {n_off} devices without a price or an estimate "
             "are not placed", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return save_figure(fig, out_dir, stem)


def throughput_plot(panels: dict[str, list[tuple[str, list[tuple[int, float]]]]], out_dir: Path,
                    stem: str = "transformer-tokens-per-s") -> list[Path]:
    """The transformer study's throughput: tokens/s against batch, log-log, one panel per task (train, infer),
    a line per series (framework, device, model, precision, sequence length); repetitions at their median."""
    panels = {k: v for k, v in panels.items() if v}
    if not panels:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.5), squeeze=False)
    for ax, (task, series) in zip(axes[0], panels.items(), strict=True):
        for i, (label, points) in enumerate(series):
            merged: dict[int, list[float]] = defaultdict(list)
            for b, v in points:
                merged[b].append(v)
            xs = sorted(merged)
            ax.plot(xs, [statistics.median(merged[b]) for b in xs], marker=_MARKERS[i % len(_MARKERS)], label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences per step)")
        ax.set_ylabel("tokens/s (from the median step time)")
        ax.set_title(f"transformer {task}: tokens/s against batch", fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def latency_percentiles_plot(cases: list[tuple[str, dict[str, float | None]]], out_dir: Path,
                             stem: str = "transformer-ttft-tpot") -> list[Path]:
    """Generation's tails: TTFT and TPOT p50, p90, p99 and max per case (one column per case, labelled with its
    framework and shape), log scale. `cases`: (label, generation metrics as `core.phases` names them)."""
    cases = [(label, g) for label, g in cases if g.get("ttft_p50_s") is not None]
    if not cases:
        return []
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(max(9.0, 1.0 + 0.9 * len(cases)) * 1.6, 5.5))
    marks = (("p50", "o", "tab:blue"), ("p90", "s", "tab:orange"), ("p99", "^", "tab:red"), ("max", "x", "0.3"))
    for ax, phase, what in ((axes[0], "ttft", "time to first token"), (axes[1], "tpot", "time per output token")):
        xs = list(range(len(cases)))
        for name, marker, colour in marks:
            pts = [(x, g.get(f"{phase}_{name}_s")) for x, (_, g) in zip(xs, cases, strict=True)]
            pts = [(x, v) for x, v in pts if v]
            if pts:
                ax.scatter(*zip(*pts, strict=True), marker=marker, color=colour, label=name, zorder=3)
        ax.set_xticks(xs, [label for label, _ in cases], rotation=60, ha="right", fontsize=7)
        ax.set_xlim(-0.6, len(cases) - 0.4)
        ax.set_yscale("log")
        ax.set_ylabel("seconds")
        ax.set_title(f"generation: {what} (timed calls; first call apart)", fontsize=10)
        ax.grid(True, which="both", axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def bandwidth_curve_plot(points: list[Any], op_order: tuple[str, ...], out_dir: Path, title: str,
                         stem: str = "bandwidth-curve") -> list[Path]:
    """Log-log bandwidth against working set: the curve each device's run measured (its best rate per
    working set, a bar down by its spread), the envelope cases are judged against (dashed), the plateaus
    found in it (thick, labelled), the reported cache sizes (dotted), and every case placed at its own
    working set (colour: op, marker: framework; red edge: flagged above; hollow: not judged).

    `points` are the ops report's `OpsPoint`s; [] (nothing written) where no run of them has a curve."""
    from matplotlib.ticker import FuncFormatter

    from dlperf.hardware.bwcurve import envelope
    from dlperf.units import format_size

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
        ax.scatter(ws, rate / 1e9, marker=_MARKERS[frameworks.index(p.framework) % len(_MARKERS)], s=40,
                   facecolors=colour if judged else "none", edgecolors="red" if p.roof["flag"] else colour,
                   linewidths=1.6 if p.roof["flag"] else 1.0, zorder=3)
    for op in ops:
        ax.scatter([], [], color=cmap(ops.index(op) % 10), marker="o", label=f"op: {op}")
    for fw in frameworks:
        ax.scatter([], [], color="0.3", marker=_MARKERS[frameworks.index(fw) % len(_MARKERS)], label=fw)
    ax.scatter([], [], facecolors="none", edgecolors="0.3", label="not judged (validity or noisy ceiling)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_size(x)))
    ax.set_yscale("log")
    ax.set_xlabel("working set (the arrays touched; dotted: cache sizes the machine reports)")
    ax.set_ylabel("bandwidth, GB/s")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7.5, loc="lower left", ncol=2, framealpha=0.9)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem, dpi=130)
