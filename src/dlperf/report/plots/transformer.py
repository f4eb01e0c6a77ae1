"""The transformer study's figures: tokens/s against batch, and generation's TTFT and TPOT tails."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from dlperf.report.plots import MARKERS, _pyplot, log_scale, save_figure


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
            ax.plot(xs, [statistics.median(merged[b]) for b in xs], marker=MARKERS[i % len(MARKERS)], label=label)
        log_scale(ax, "x", base=2)
        log_scale(ax, "y")
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
        log_scale(ax, "y")
        ax.set_ylabel("seconds")
        ax.set_title(f"generation: {what} (timed calls; first call apart)", fontsize=10)
        ax.grid(True, which="both", axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)
