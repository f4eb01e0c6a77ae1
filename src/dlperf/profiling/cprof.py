"""A cProfile profile of a callable: the top functions by inclusive (cumulative) and by self time."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from typing import Any


def profile(fn: Callable[[], object], top: int = 15) -> dict[str, Any]:
    """Run `fn` once under cProfile; return its total time and the top functions both ways (seconds)."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.split("site-packages/")[-1].split("src/")[-1]
        rows.append({"function": f"{where}:{line}({func})", "ncalls": ncalls, "self_s": tottime,
                     "inclusive_s": cumtime})
    return {
        "total_s": stats.total_tt,  # type: ignore[attr-defined]
        "by_inclusive": sorted(rows, key=lambda r: -r["inclusive_s"])[:top],
        "by_self": sorted(rows, key=lambda r: -r["self_s"])[:top],
    }
