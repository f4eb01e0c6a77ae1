"""Samples a median cannot summarise: two clusters (`bimodal`) or a trend across sample order (`drift`).

`shape_flags(times_s)` takes per-call times in sample order (`Measurement.times_s`) and returns one
human reason per problem found, empty when the median is a fair summary. Pure Python (no NumPy or
SciPy: `dlperf.timing` imports no framework) and cheap: one sort and two linear passes.

Bimodal. Times are compared on a log scale (a mode 10x slower is as far from the fast mode as the
fast one is from one 10x faster; spreads of timings grow with the time). The sorted log-times are
split in two where the between-cluster variance is largest (Otsu's threshold, the exact 1-D 2-means),
each side holding at least `BIMODAL_MIN_FRACTION` of the samples (and 3); the split is kept when

* Ashman's D = sqrt(2) |mean_hi - mean_lo| / sqrt(var_lo + var_hi) >= `BIMODAL_MIN_D` (6), with the
  sample (n - 1) variances of the two sides. D > 2 separates the two components of a Gaussian
  mixture; 6 because the split is chosen to look separated: cutting one normal sample in two gives
  D ~ 2.7, a uniform one ~ 3.5, and at small n chance pushes these up. Simulated over 300 seeds
  each (lognormal sigma 0.05-1, gamma, 1 + exponential, exponential, Pareto, uniform and
  log-uniform up to 10x wide): no flag at n >= 50, at most 1% at n = 30 and 1.7% at n = 20; below `MIN_SAMPLES`
  (20) no flag is raised at all. The D of the numpy dot seen in issue 13 (1.21 ms and ~11 ms
  modes a few % wide) is far above 20.
* the two sides' medians differ by >= `BIMODAL_MIN_RATIO` (1.2x): closer modes widen the IQR,
  which the noise flag already reports, but do not make two regimes a user must know about.

A cluster of slow samples holding >= 10% of the run counts as a mode on purpose: the mean, and any
rate over the whole run, are off by it even where the median is not. Other choices were weighed:
the bimodality coefficient (skewness and kurtosis) fires on the skewed, heavy-tailed unimodal
shapes timings usually have; the largest gap between sorted values loses power as n grows
(tails of close modes fill the gap); Hartigan's dip test needs tables or SciPy.

Drift. The first and last thirds of the samples, in the order they were taken, are compared: the
relative change of their medians must exceed `DRIFT_MIN_CHANGE` (10%) and a Mann-Whitney U test
(normal approximation with tie correction and continuity correction, conservative at small n)
must give p < `DRIFT_MAX_P` (0.001), so noise alone raises it about once in a thousand
measurements. Thirds rather than a correlation over all samples: a step (contention that started
midway) and a ramp (heating, a growing cache) both show, and the size of the change is what the
reason states. Needs >= `DRIFT_MIN_SAMPLES` (24: 8 per third, the fewest that can reach p < 0.001).
Samples taken in a row are not independent (a bad second spoils several); a burst confined to one
third is then reported as drift, which is what it is for the figure: it depends on when one looks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlperf.units import format_time

#: Fewer samples than this: no bimodality verdict (chance splits look separated).
MIN_SAMPLES = 20
#: Each cluster must hold at least this fraction of the samples (and at least 3).
BIMODAL_MIN_FRACTION = 0.10
#: Ashman's D on log-times that a split must reach to be called two modes.
BIMODAL_MIN_D = 6.0
#: The two clusters' medians must differ at least by this factor.
BIMODAL_MIN_RATIO = 1.2
#: Fewest samples for a drift verdict (8 per third).
DRIFT_MIN_SAMPLES = 24
#: Smallest relative change between the first and last third's medians that is reported.
DRIFT_MIN_CHANGE = 0.10
#: Largest two-sided Mann-Whitney p-value that is taken as "not chance".
DRIFT_MAX_P = 1e-3


@dataclass(frozen=True)
class Bimodal:
    """Two clusters: the minority's share and median, the majority's median (seconds), Ashman's D."""

    minority_fraction: float
    minority_median_s: float
    majority_median_s: float
    ashman_d: float

    def reason(self) -> str:
        return (f"bimodal: {self.minority_fraction:.0%} of samples near {format_time(self.minority_median_s)}, "
                f"the rest near {format_time(self.majority_median_s)}")


@dataclass(frozen=True)
class Drift:
    """The last third's median against the first's (relative change) and the rank test's p-value."""

    change: float
    p_value: float

    def reason(self) -> str:
        way = "slower" if self.change > 0 else "faster"
        return f"drifting: the last third is {abs(self.change):.0%} {way} than the first (p={self.p_value:.1g})"


def shape_flags(times_s: Sequence[float]) -> list[str]:
    """Human reasons why the median does not summarise these per-call times (in sample order); [] if none."""
    flags = []
    bimodal = find_bimodal(times_s)
    if bimodal is not None:
        flags.append(bimodal.reason())
    drift = find_drift(times_s)
    if drift is not None:
        flags.append(drift.reason())
    return flags


def find_bimodal(times_s: Sequence[float]) -> Bimodal | None:
    """The two clusters of the log-times if they are separated as the module doc says, else None."""
    n = len(times_s)
    if n < MIN_SAMPLES or any(t <= 0 for t in times_s):
        return None
    logs = sorted(math.log(t) for t in times_s)
    k = _otsu_split(logs, max(3, math.ceil(BIMODAL_MIN_FRACTION * n)))
    if k is None:
        return None
    lo, hi = logs[:k], logs[k:]
    spread = statistics.variance(lo) + statistics.variance(hi)
    gap = statistics.fmean(hi) - statistics.fmean(lo)
    d = math.inf if spread == 0 else math.sqrt(2) * gap / math.sqrt(spread)
    lo_median, hi_median = math.exp(statistics.median(lo)), math.exp(statistics.median(hi))
    if d < BIMODAL_MIN_D or hi_median < BIMODAL_MIN_RATIO * lo_median:
        return None
    minority, majority = (hi_median, lo_median) if len(hi) <= len(lo) else (lo_median, hi_median)
    return Bimodal(min(len(lo), len(hi)) / n, minority, majority, d)


def _otsu_split(sorted_values: Sequence[float], min_side: int) -> int | None:
    """Index k maximising the between-cluster variance of values[:k] | values[k:], both >= min_side long."""
    n = len(sorted_values)
    if n < 2 * min_side:
        return None
    total = math.fsum(sorted_values)
    mean = total / n
    best_k, best = None, -1.0
    prefix = math.fsum(sorted_values[:min_side - 1])
    for k in range(min_side, n - min_side + 1):
        prefix += sorted_values[k - 1]
        between = k * (prefix / k - mean) ** 2 + (n - k) * ((total - prefix) / (n - k) - mean) ** 2
        if between > best:
            best_k, best = k, between
    return best_k


def find_drift(times_s: Sequence[float]) -> Drift | None:
    """The first-third-to-last-third change if it is large and unlikely by chance, else None."""
    n = len(times_s)
    if n < DRIFT_MIN_SAMPLES:
        return None
    third = n // 3
    first, last = list(times_s[:third]), list(times_s[n - third:])
    m_first, m_last = statistics.median(first), statistics.median(last)
    if m_first <= 0:
        return None
    change = m_last / m_first - 1
    if abs(change) < DRIFT_MIN_CHANGE:
        return None
    p = mann_whitney_p(first, last)
    return Drift(change, p) if p < DRIFT_MAX_P else None


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie and continuity corrected)."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    n = n1 + n2
    rank_sum_a = 0.0
    tie_term = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        mid_rank = (i + j) / 2 + 1
        rank_sum_a += mid_rank * sum(1 for s in range(i, j + 1) if pooled[s][1] == 0)
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    u = rank_sum_a - n1 * (n1 + 1) / 2
    mean_u = n1 * n2 / 2
    var_u = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var_u <= 0:
        return 1.0
    z = max(abs(u - mean_u) - 0.5, 0.0) / math.sqrt(var_u)
    return math.erfc(z / math.sqrt(2))
