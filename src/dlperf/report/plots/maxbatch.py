"""`dlperf maxbatch`'s figure: peak memory against the searched axis, out-of-memory probes marked."""

from __future__ import annotations

from pathlib import Path

from dlperf.report.plots import _pyplot, log_scale, save_figure


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
    log_scale(ax, "x", base=2)
    ax.set_xlabel("batch size" if axis_label == "batch" else axis_label)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, out_dir, "maxbatch-memory")
