"""A cProfile profile of a callable: the top functions by inclusive (cumulative) and by self time."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from typing import TypedDict


class ProfiledFunction(TypedDict):
    """One function of a profile: its calls, its self and inclusive seconds."""

    function: str  # file:line(name), the path from below site-packages/ or src/
    ncalls: int
    self_s: float
    inclusive_s: float


class PythonProfile(TypedDict):
    """A case's `profile` as stored: the total seconds and the top functions both ways."""

    total_s: float
    by_inclusive: list[ProfiledFunction]
    by_self: list[ProfiledFunction]


def profile(fn: Callable[[], object], top: int = 15) -> PythonProfile:
    """Run `fn` once under cProfile; return its total time and the top functions both ways (seconds)."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    stats = pstats.Stats(prof)
    rows: list[ProfiledFunction] = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.split("site-packages/")[-1].split("src/")[-1]
        rows.append({"function": f"{where}:{line}({func})", "ncalls": ncalls, "self_s": tottime,
                     "inclusive_s": cumtime})
    return {
        "total_s": stats.total_tt,  # type: ignore[attr-defined]
        "by_inclusive": sorted(rows, key=lambda r: -r["inclusive_s"])[:top],
        "by_self": sorted(rows, key=lambda r: -r["self_s"])[:top],
    }
