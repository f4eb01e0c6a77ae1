"""Tick labels of log axes as plain text: matplotlib's own labels (`10³`, `2×10⁻¹`, chosen by its log formatter)
written without mathtext. matplotlib spells them as mathtext (`$\\mathdefault{10^{3}}$`), whose parser cost about
a fifth of the CPU of a report that draws plots (0.4-1 s in each process that drew a log axis: every `dlperf run`
ends with its study's plots). Imports matplotlib, so only `plots.log_scale` imports this, when a plot is drawn."""

from __future__ import annotations

import re
from typing import Any

from matplotlib.ticker import LogFormatterSciNotation

#: Digits and minus as Unicode superscripts (DejaVu Sans, matplotlib's default font, has them all); the formatter
#: writes whole exponents only.
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_MATHTEXT = re.compile(r"\$\\mathdefault\{(.*)\}\$")
_POWER = re.compile(r"\^\{([^{}]*)\}")


def as_text(label: str) -> str:
    """One of matplotlib's log tick labels as plain text: `$\\mathdefault{2\\times10^{-1}}$` -> `2×10⁻¹`; a label
    that is not of that form (an empty one, a plain number) is returned as is."""
    match = _MATHTEXT.fullmatch(label)
    if match is None:
        return label
    body = match.group(1).replace("\\times", "×")
    return _POWER.sub(lambda power: power.group(1).translate(SUPERSCRIPT), body)


class TextLogFormatter(LogFormatterSciNotation):
    """matplotlib's default log-axis formatter (which ticks get a label, and what the label says), as plain text."""

    def __call__(self, x: float, pos: Any = None) -> str:
        return as_text(super().__call__(x, pos))
