"""The cnn study's figure: study 001's Figure 1 (seconds per image against batch) drawn from this run."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from dlperf.report.plots import _pyplot, log_scale, save_figure


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
    log_scale(ax, "x", base=2)
    log_scale(ax, "y")
    ax.set_xlabel("batch size (images per step)")
    ax.set_ylabel("seconds per image (training step / batch)")
    ax.set_title("CNN training: time per image against batch size (study 001, Figure 1)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, "cnn-time-per-image")
