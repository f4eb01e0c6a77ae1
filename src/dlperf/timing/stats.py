"""Order statistics used by `Measurement`: quantiles and the distribution-free CI of a median.

Pure Python on purpose: `dlperf.timing` must import no framework (NumPy included),
and these are small lists (at most a few thousand samples).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

#: Two-sided normal quantile for 95% coverage.
Z_95 = 1.959963984540054
#: Up to this many samples the binomial tail is summed exactly; above it the
#: normal approximation of the binomial is used (error far below one rank).
EXACT_BINOMIAL_MAX_N = 300


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Quantile by linear interpolation between order statistics.

    This is Hyndman-Fan type 7, the default of NumPy and R, so numbers agree with
    what users compute themselves from the raw samples.
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("quantile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    pos = (n - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks (j, k) such that [x_(j), x_(k)] covers the median with >= `confidence`.

    Distribution-free: the number of samples below the true median is Binomial(n, 1/2),
    so P(x_(j) <= median <= x_(k)) = P(j <= B <= k - 1). The interval is symmetric
    (k = n + 1 - j) and as narrow as the coverage allows. Returns None when even the
    full range [x_(1), x_(n)] covers less than `confidence` (n < 6 for 95%).
    """
    if n < 1:
        return None
    alpha = 1.0 - confidence
    if n <= EXACT_BINOMIAL_MAX_N:
        # The largest j with P(B <= j - 1) <= alpha / 2, summing the exact tail upward.
        limit = alpha / 2 * 2**n
        cumulative = 0
        j = 0
        while j < n and cumulative + math.comb(n, j) <= limit:
            cumulative += math.comb(n, j)
            j += 1
        if j < 1:
            return None
    else:
        z = Z_95 if abs(confidence - 0.95) < 1e-12 else _normal_quantile(1 - alpha / 2)
        j = math.floor(n / 2 - z * math.sqrt(n) / 2)
    j = max(j, 1)
    k = n + 1 - j
    if j > k:
        return None
    return j, k


def _normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF (statistics.NormalDist, stdlib)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def median_ci(sorted_values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """The order-statistic confidence interval of the median, or None if n is too small."""
    ranks = median_ci_ranks(len(sorted_values), confidence)
    if ranks is None:
        return None
    j, k = ranks
    return sorted_values[j - 1], sorted_values[k - 1]
