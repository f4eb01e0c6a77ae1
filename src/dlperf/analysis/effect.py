"""How much slower or faster B is than A, with a 95% confidence interval: the estimators `compare` uses.

Times are compared on the log scale, where a change is a factor: a shift d of log time is the ratio
exp(d) of B over A, and "5% slower" and "5% faster" are the same distance from no change.

- One process on each side: the Hodges-Lehmann estimate of the shift (the median of
  all pairwise differences log b_j - log a_i) with its distribution-free confidence interval, read off
  the same order statistics at ranks given by the null distribution of the Mann-Whitney U statistic
  (exact for small samples, normal with a tie correction above). Chosen over a bootstrap of the ratio
  of medians because it needs no seed and no resampling (the same numbers on every run), holds its
  coverage for any continuous distribution under a shift model (a multiplicative change, on this
  scale), is robust to the outliers timings have, and agrees with the Mann-Whitney p-value printed
  beside it (the interval excludes 1 when the test rejects at the same level, up to rounding of ranks).
- One process a side against two or more (an A/A pair of 3-repetition runs where one process was left out as
  contended gives 3 against 2): the per-process medians again, with Student's t on their pooled spread
  (degrees of freedom n + m - 2). Pooling the samples here called an A/A pair "slower" at p = 1e-43 on the AMD
  VM (numpy sigmoid, 0.5 MB, 3 against 2 processes): the samples were many, the processes few and apart. With
  so few processes the interval is wide (t = 3.18 at 3 degrees of freedom), which is the honest answer.
- Three or more processes on both sides: the process is the unit that repeats, so the estimate is the
  ratio of the geometric means of the per-process medians and the interval Welch's t on the log
  medians. Pooling all samples would treat thousands of samples from a few processes as independent
  and give a narrow interval that ignores how much one process differs from the next (a process can
  land on a bad core, a bad memory layout, a bad moment); comparing per-process medians lets that
  spread widen the interval. A rank interval cannot be used here: with 3 against 3 processes no
  distribution-free 95% interval exists. Welch's t assumes the log medians are roughly normal
  (medians of many samples are), and does not assume the two sides spread alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

#: Coverage of every interval `compare` prints.
CONFIDENCE = 0.95
#: Both sides need at least this many processes for the per-process comparison.
MIN_PROCESSES = 3
#: Up to this n + m the Mann-Whitney null distribution is computed exactly; above it, the normal approximation.
EXACT_MAX_N = 60
#: Up to this many pairwise differences they are built in memory; above it order statistics are found by
#: bisection on the value with counting (no n x m array; a result within 1e-12 of the exact one).
MATERIALIZE_MAX_PAIRS = 2_000_000

Method = Literal["samples", "processes"]


@dataclass(frozen=True)
class Effect:
    """B/A: the point estimate, its interval (None where too few samples give none) and the test's p-value."""

    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    method: Method


@lru_cache(maxsize=256)
def _u_null_cdf(n: int, m: int) -> np.ndarray:
    """P(U <= u), u = 0..n*m, for U = #{(i, j): x_i < y_j} with no ties and no difference (exact).

    The largest of the n + m values is an x with probability n/(n+m) (it adds nothing to U) or a y
    (it exceeds all n x's): p(n, m, u) = n/(n+m) p(n-1, m, u) + m/(n+m) p(n, m-1, u-n). Sums of
    positives only, so no cancellation.
    """
    prev = [np.ones(1) for _ in range(m + 1)]  # n = 0: U = 0 for every m
    for i in range(1, n + 1):
        row = [np.ones(1)]
        for j in range(1, m + 1):
            out = np.zeros(i * j + 1)
            out[: prev[j].size] += i / (i + j) * prev[j]
            out[i: i + row[j - 1].size] += j / (i + j) * row[j - 1]
            row.append(out)
        prev = row
    return np.cumsum(prev[m])


def _z(confidence: float) -> float:
    from scipy.special import ndtri  # the normal quantile (scipy.stats' import is twice scipy.special's)

    return float(ndtri(0.5 + confidence / 2))


def critical_rank(n: int, m: int, confidence: float = CONFIDENCE, tie_term: float = 0.0) -> int:
    """c such that [D_(c), D_(nm+1-c)] (1-based order statistics of the n*m differences) covers the shift
    with at least `confidence`; 0 when no interval of that coverage exists (too few samples).

    c is the largest integer with P(U <= c - 1) <= (1 - confidence) / 2. `tie_term` is sum(t^3 - t)
    over groups of tied values (normal approximation only).
    """
    half_alpha = (1 - confidence) / 2
    if n + m <= EXACT_MAX_N:
        return int(np.sum(_u_null_cdf(n, m) <= half_alpha * (1 + 1e-9)))
    total = n + m
    var = n * m / 12 * ((total + 1) - tie_term / (total * (total - 1)))
    c = math.floor(n * m / 2 + 0.5 - _z(confidence) * math.sqrt(max(var, 0.0)))
    return max(c, 0)


def _kth_difference(x_sorted: np.ndarray, y_sorted: np.ndarray, k: int) -> float:
    """The k-th smallest (1-based) of y_j - x_i, by bisection on the value: #{y_j - x_i <= d} is a sum of
    binary searches, so no n x m array is built."""
    n = x_sorted.size

    def count_le(d: float) -> int:
        return int(n * y_sorted.size - np.searchsorted(x_sorted, y_sorted - d, side="left").sum())

    lo, hi = float(y_sorted[0] - x_sorted[-1]) - 1.0, float(y_sorted[-1] - x_sorted[0])
    while hi - lo > 1e-12 * max(1.0, abs(hi)):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if count_le(mid) >= k:
            hi = mid
        else:
            lo = mid
    return hi


def _order_stats(x: np.ndarray, y: np.ndarray, ranks: Sequence[int]) -> list[float]:
    """The order statistics at these 1-based ranks of all y_j - x_i."""
    if x.size * y.size <= MATERIALIZE_MAX_PAIRS:
        diffs = (y[None, :] - x[:, None]).ravel()
        part = np.partition(diffs, [r - 1 for r in ranks])
        return [float(part[r - 1]) for r in ranks]
    xs, ys = np.sort(x), np.sort(y)
    return [_kth_difference(xs, ys, r) for r in ranks]


def hodges_lehmann(x: Sequence[float], y: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None]:
    """(shift, low, high): the Hodges-Lehmann estimate of the shift of y against x (median of all y_j - x_i)
    and its distribution-free interval (None, None when the samples are too few for that coverage)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n, m = xa.size, ya.size
    if n == 0 or m == 0:
        raise ValueError("Hodges-Lehmann needs samples on both sides")
    total = n * m
    mid = [(total + 1) // 2, total // 2 + 1]  # the median: one rank when n*m is odd, the mean of two when even
    _, counts = np.unique(np.concatenate([xa, ya]), return_counts=True)
    c = critical_rank(n, m, confidence, float(np.sum(counts.astype(float) ** 3 - counts)))
    ranks = mid + ([c, total + 1 - c] if c >= 1 else [])
    stats = _order_stats(xa, ya, ranks)
    shift = (stats[0] + stats[1]) / 2
    return (shift, stats[2], stats[3]) if c >= 1 else (shift, None, None)


def _t_interval(d: float, se: float, df: float, confidence: float) -> tuple[float, float, float, float]:
    """(d, low, high, two-sided p) of a shift `d` with standard error `se` on Student's t with `df` degrees of
    freedom; no spread at all (se 0: every process had the same median) gives the point and p 1 or 0."""
    if se == 0.0:
        return d, d, d, (1.0 if d == 0.0 else 0.0)
    from scipy.special import stdtr, stdtrit  # Student's t CDF and quantile

    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    return d, d - half, d + half, float(2 * stdtr(df, -abs(d) / se))


def welch(x: Sequence[float], y: Sequence[float],
          confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(mean(y) - mean(x), low, high, two-sided p) by Welch's t; at least two values on each side."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.size < 2 or ya.size < 2:
        raise ValueError("Welch's t needs at least two values on each side")
    va, vb = float(xa.var(ddof=1)) / xa.size, float(ya.var(ddof=1)) / ya.size
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (ya.size - 1)) if va + vb > 0 else 1.0
    return _t_interval(float(ya.mean() - xa.mean()), math.sqrt(va + vb), df, confidence)


def pooled_t(x: Sequence[float], y: Sequence[float],
             confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(mean(y) - mean(x), low, high, two-sided p) by Student's t with the two sides' spread pooled: for few
    processes, where one side may have a single value (it adds to the mean, not to the spread)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    df = xa.size + ya.size - 2
    if xa.size < 1 or ya.size < 1 or df < 1:
        raise ValueError("the pooled t needs a value on each side and three in all")
    ss = float(((xa - xa.mean()) ** 2).sum() + ((ya - ya.mean()) ** 2).sum())
    se = math.sqrt(ss / df * (1 / xa.size + 1 / ya.size))
    return _t_interval(float(ya.mean() - xa.mean()), se, df, confidence)


def estimate(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], confidence: float = CONFIDENCE) -> Effect:
    """B/A from per-call times grouped by process (one sequence per process and side); see the module doc."""
    if not a or not b or not all(a) or not all(b):
        raise ValueError("every process needs samples")
    med_a = [math.log(float(np.median(p))) for p in a]
    med_b = [math.log(float(np.median(p))) for p in b]
    if len(a) >= MIN_PROCESSES and len(b) >= MIN_PROCESSES:
        d, lo, hi, p = welch(med_a, med_b, confidence)
        return Effect(math.exp(d), math.exp(lo), math.exp(hi), p, "processes")
    if max(len(a), len(b)) >= 2:  # the spread between processes is measured on one side at least
        d, lo, hi, p = pooled_t(med_a, med_b, confidence)
        return Effect(math.exp(d), math.exp(lo), math.exp(hi), p, "processes")
    from scipy.stats import mannwhitneyu

    log_a = np.log(np.concatenate([np.asarray(p, dtype=float) for p in a]))
    log_b = np.log(np.concatenate([np.asarray(p, dtype=float) for p in b]))
    shift, lo_s, hi_s = hodges_lehmann(log_a, log_b, confidence)
    p_value = float(mannwhitneyu(log_a, log_b, alternative="two-sided").pvalue)
    if math.isnan(p_value):
        p_value = 1.0  # scipy gives nan when every value is equal: nothing tells the sides apart
    if lo_s is None or hi_s is None:
        return Effect(math.exp(shift), None, None, p_value, "samples")
    return Effect(math.exp(shift), math.exp(lo_s), math.exp(hi_s), p_value, "samples")
