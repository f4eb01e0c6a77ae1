"""The verdict both warm-compile benchmarks print (xla_warm_compile.py, inductor_warm_compile.py): the median
cold and warm compile over the rounds that timed a warm one, their ratio, and whether the target is met (ratio
under TARGET_RATIO, every round timed, every warm compile a cache hit)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

TARGET_RATIO = 1.0


def judge(rounds: list[dict], hit: Callable[[dict], bool], fmt: Callable[[float], str], what: str) -> int:
    """Print the verdict line over `rounds` (each with `cold_s` and `warm_s`, None where the warm one did not
    run); `hit` says whether a round's warm `what` was the cache's, `fmt` writes seconds. 0 if met, else 1."""
    timed = [r for r in rounds if r.get("warm_s") is not None]
    if not timed:
        print(f"no warm {what} ran: target MISSED")
        return 1
    cold, warm = statistics.median(r["cold_s"] for r in timed), statistics.median(r["warm_s"] for r in timed)
    hits = all(hit(r) for r in rounds)
    met = warm / cold < TARGET_RATIO and hits and len(timed) == len(rounds)
    print(f"median cold {fmt(cold)} | median warm {fmt(warm)} | ratio warm/cold {warm / cold:.2f} | every warm "
          f"{what} a cache hit: {hits} | target ratio < {TARGET_RATIO:g}: {'met' if met else 'MISSED'}")
    return 0 if met else 1
