"""Log axes are labelled in plain text (report.plots.log_scale): matplotlib's own choice of labels, spelled without
mathtext, whose parser was about a fifth of the CPU of a report that draws plots."""

from __future__ import annotations

from pathlib import Path

import matplotlib._mathtext
import matplotlib.pyplot as plt
import pytest
from matplotlib.ticker import LogFormatterSciNotation

from dlperf.report.plots import log_scale, panel_grid, save_figure
from dlperf.report.plots.ticks import TextLogFormatter, as_text


@pytest.mark.parametrize(("mathtext", "text"), [
    (r"$\mathdefault{10^{3}}$", "10³"),
    (r"$\mathdefault{10^{-12}}$", "10⁻¹²"),
    (r"$\mathdefault{2\times10^{-1}}$", "2×10⁻¹"),
    (r"$\mathdefault{2^{5}}$", "2⁵"),
    (r"$\mathdefault{0.5}$", "0.5"),
    ("", ""),
    ("1 KiB", "1 KiB"),
])
def test_a_mathtext_label_as_text(mathtext: str, text: str) -> None:
    assert as_text(mathtext) == text


@pytest.mark.parametrize(("base", "low", "high"), [(10, 1e-3, 1e5), (10, 0.03, 0.3), (2, 1, 4096), (2, 3, 5)])
def test_labels_are_matplotlibs_own_in_plain_text(base: int, low: float, high: float) -> None:
    """The same ticks get a label as with matplotlib's default formatter (which ones is its choice: decades only
    over a wide range, some minor ticks over a narrow one), each label matplotlib's, without `$`."""
    fig, axes = panel_grid(1)
    ax = axes[0][0]
    log_scale(ax, "x", base=base)
    ax.set_xlim(low, high)
    fig.canvas.draw()
    labelled = []
    for mine, formatter, locator in ((ax.xaxis.get_major_formatter(), LogFormatterSciNotation(base),
                                      ax.xaxis.get_major_locator()),
                                     (ax.xaxis.get_minor_formatter(), LogFormatterSciNotation(base),
                                      ax.xaxis.get_minor_locator())):
        assert isinstance(mine, TextLogFormatter)
        formatter.set_axis(ax.xaxis)
        locs = [x for x in locator() if low <= x <= high]
        formatter.set_locs(locs)
        theirs = [formatter(x) for x in locs]
        ours = [mine(x) for x in locs]
        assert ours == [as_text(label) for label in theirs]
        assert not any("$" in label for label in ours)
        labelled += [label for label in ours if label]
    assert labelled
    plt.close(fig)


def test_drawing_log_axes_never_parses_mathtext(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("mathtext parsed")

    monkeypatch.setattr(matplotlib._mathtext.Parser, "parse", refuse)
    fig, axes = panel_grid(2)
    for ax, base in zip(axes.flat, (10, 2), strict=True):
        log_scale(ax, "x", base=base)
        log_scale(ax, "y")
        ax.plot([1, 10, 1000], [0.02, 0.5, 300])
    fig.tight_layout()
    paths = save_figure(fig, tmp_path, "logs")
    svg = paths[1].read_text()
    assert "10³" in svg and "2⁴" in svg  # the labels went into the SVG as text
