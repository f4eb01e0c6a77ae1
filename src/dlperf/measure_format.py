"""Human formatting of measured quantities with their units."""

from __future__ import annotations

from dlperf.timing import format_time


def fmt_s(t_s: float | None) -> str:
    return format_time(t_s)


def fmt_j(e_j: float | None) -> str:
    if e_j is None:
        return "-"
    if abs(e_j) >= 1:
        return f"{e_j:.3g} J"
    if abs(e_j) >= 1e-3:
        return f"{e_j * 1e3:.3g} mJ"
    return f"{e_j * 1e6:.3g} uJ"
