"""How many Server queries LoadGen's early stopping needs before a run with `late` over-latency queries can pass.

LoadGen's `early_stopping.cc` (6.0.17, confidence 0.99, tolerance 0): a Server run with t queries over the latency
bound passes only when it issued at least h + t queries, h the smallest count with
BetaRegularized[p, h, 1 + t] < 1 - confidence (p the bound's percentile): the odds of t or fewer late queries among
h + t if a query were late with probability 1 - p. That is the binomial CDF, computed here in log space:
t = 0 gives 459 at p99 (LoadGen's floor), t = 1 gives 662, t = 10 gives 2010.

Why it matters: with the floor of 459 queries a Server run is a "not one query late" test, which one scheduler
hiccup on a shared machine fails at any rate; the search's probes run enough queries to let a few be late.
"""

from __future__ import annotations

import math
from functools import lru_cache

#: LoadGen's early-stopping confidence (results.cc).
CONFIDENCE = 0.99


def _binomial_cdf(n: int, k: int, p_late: float) -> float:
    """P(at most k late queries among n), each late with probability `p_late`."""
    log_on, log_off = math.log(p_late), math.log1p(-p_late)
    terms = [math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * log_on + (n - x) * log_off
             for x in range(min(k, n) + 1)]
    top = max(terms)
    return math.exp(top) * sum(math.exp(t - top) for t in terms)


@lru_cache(maxsize=64)
def server_queries_allowing(late: int, percentile: float = 0.99, confidence: float = CONFIDENCE) -> int:
    """The fewest queries (h + t) with which a Server run that had `late` over-latency queries passes early
    stopping (LoadGen's `find_min_passing` plus t)."""
    if late < 0:
        raise ValueError(f"late queries cannot be negative (got {late})")
    p_late = 1 - percentile

    def passes(h: int) -> bool:
        return _binomial_cdf(h + late, late, p_late) < 1 - confidence

    lo, hi = 1, 1
    while not passes(hi):
        lo, hi = hi + 1, hi * 2
    while lo < hi:  # the smallest passing h in [lo, hi]
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo + late
