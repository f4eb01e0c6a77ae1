"""Every plot dlperf draws lives in this package, one module per subject (`ops`, `cnn`, `transformer`, `compiler`,
`serving`, `scaling`, `history`, `samples`, `paper`, `maxbatch`, `recommend`); here are the helpers they share:
matplotlib on the Agg backend (no screen), the panel grid, one style per series, and `save_figure` (PNG and SVG).

Each plot function takes plain data (the report builds it) and the folder to write to, and returns the
files it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlperf.errors import DlperfError
from dlperf.untrusted import path_component

#: One marker per series (frameworks, labels), cycled.
MARKERS = "osD^v<>Pp*Xh"


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
    return {label: (f"C{i % 10}", MARKERS[i % len(MARKERS)]) for i, label in enumerate(sorted(set(labels)))}


def log_scale(ax: Any, which: str, base: float = 10) -> None:
    """Make `ax`'s `which` axis ("x" or "y") logarithmic in `base`, labelled as matplotlib labels it (10³, 2×10⁻¹)
    but in plain text, not mathtext (whose parser was about a fifth of the CPU of a report that draws plots)."""
    from dlperf.report.plots.ticks import TextLogFormatter

    getattr(ax, f"set_{which}scale")("log", base=base)
    axis = getattr(ax, f"{which}axis")
    major, minor = axis.get_major_formatter(), axis.get_minor_formatter()
    axis.set_major_formatter(TextLogFormatter(base, labelOnlyBase=major.labelOnlyBase))
    axis.set_minor_formatter(TextLogFormatter(base, labelOnlyBase=minor.labelOnlyBase))


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
