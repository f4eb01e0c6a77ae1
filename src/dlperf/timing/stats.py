"""Order statistics used by `Measurement`: quantiles and distribution-free CIs of a median or any quantile.

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


@lru_cache(maxsize=4096)
def quantile_ci_ranks(n: int, q: float, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks (j, k) such that [x_(j), x_(k)] covers the q-quantile with >= `confidence`.

    Distribution-free, for any continuous distribution: the number B of samples below the true
    q-quantile is Binomial(n, q), and x_(j) <= quantile < x_(k) exactly when j <= B <= k - 1. The interval
    is equal-tailed: j is the largest rank with P(B <= j - 1) <= alpha/2 and k the smallest with
    P(B >= k) <= alpha/2, so each side misses with at most alpha/2. None when a tail cannot be held to
    alpha/2 even at the extreme order statistic: P(B = 0) = (1-q)^n > alpha/2 or P(B = n) = q^n > alpha/2
    (for 95%: n < 6 for the median, n < 36 for p90, n < 368 for p99). At q = 0.5 this is `median_ci_ranks`.
    The binomial terms are summed exactly in log space (lgamma), so any n works.
    """
    if n < 1 or not 0.0 < q < 1.0 or not 0.0 < confidence < 1.0:
        return None
    tail = (1.0 - confidence) / 2 * (1 + 1e-9)  # the slack: float rounding must not move a rank at a tie
    log_q, log_p = math.log(q), math.log1p(-q)
    lg_n = math.lgamma(n + 1)

    def pmf(i: int) -> float:
        return math.exp(lg_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_q + (n - i) * log_p)

    # lower: P(B <= j - 1) <= tail, summing upward from B = 0
    cumulative, j = 0.0, 0
    while j < n and cumulative + pmf(j) <= tail:
        cumulative += pmf(j)
        j += 1
    # upper: P(B >= k) <= tail, summing downward from B = n
    cumulative, k = 0.0, n + 1
    while k > 1 and cumulative + pmf(k - 1) <= tail:
        cumulative += pmf(k - 1)
        k -= 1
    if j < 1 or k > n or j >= k:
        return None
    return j, k


def quantile_ci(sorted_values: Sequence[float], q: float,
                confidence: float = 0.95) -> tuple[float, float] | None:
    """The order-statistic confidence interval of the q-quantile (`quantile_ci_ranks`), or None if n is too
    small for that coverage."""
    ranks = quantile_ci_ranks(len(sorted_values), q, confidence)
    if ranks is None:
        return None
    j, k = ranks
    return sorted_values[j - 1], sorted_values[k - 1]


#: The percentiles of a tail summary (per-call timing, generation's phases), as (key, q).
TAIL_QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def tail_keys(prefix: str = "", unit: str = "_s") -> list[str]:
    """The keys `tail_summary` returns, in order (e.g. p50_s, p50_ci95_low_s, ..., max_s, mean_s)."""
    keys = []
    for name, _ in TAIL_QUANTILES:
        keys += [f"{prefix}{name}{unit}", f"{prefix}{name}_ci95_low{unit}", f"{prefix}{name}_ci95_high{unit}"]
    return keys + [f"{prefix}max{unit}", f"{prefix}mean{unit}"]


def tail_summary(values: Sequence[float], prefix: str = "", unit: str = "_s") -> dict[str, float | None]:
    """p50, p90, p99 (type 7, as NumPy's default), each with its distribution-free 95% CI (None where n is
    too small for 95%), the max and the plain mean of `values`; every key None for an empty sample."""
    s = sorted(values)
    out: dict[str, float | None] = dict.fromkeys(tail_keys(prefix, unit))
    if not s:
        return out
    for name, q in TAIL_QUANTILES:
        ci = quantile_ci(s, q)
        out[f"{prefix}{name}{unit}"] = quantile(s, q)
        out[f"{prefix}{name}_ci95_low{unit}"] = ci[0] if ci else None
        out[f"{prefix}{name}_ci95_high{unit}"] = ci[1] if ci else None
    out[f"{prefix}max{unit}"] = s[-1]
    out[f"{prefix}mean{unit}"] = math.fsum(s) / len(s)
    return out
