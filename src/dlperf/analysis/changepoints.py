"""Change points in a series of per-run medians: PELT (Killick, Fearnhead & Eckley 2012) through `ruptures`.

The method, and why:
- Signal: the log of each run's median time per step. On the log scale a step of +30% has the same size
  whatever the case's time, and run-to-run noise of benchmarks is roughly multiplicative.
- Cost model: `l2` (least squared deviation: a change in the mean of the log medians, Gaussian noise of
  unknown level between changes). `min_size=1`, `jump=1`: a single newest run can start a segment, so a
  step that arrives with the newest run is found at once.
- Penalty: `PENALTY_BETA * sigma**2 * log(n)` with PENALTY_BETA = 3. The BIC / Schwarz criterion for a
  change in mean with noise variance sigma**2 charges 2 log(n) per change (a location and a level); the
  modified BIC (Zhang & Siegmund 2007, the default of R's `changepoint`) charges about 3 log(n), and with
  the dozen runs a CI history has, BIC splits flat noise too often: on 200 seeded flat series of 12 runs
  with 2% run-to-run noise, 5 got a change point at beta 3 (with the excursion rule below) against 10 at
  beta 2 (without it), while a 30% step at run 7 was found exactly in 194/200 against 185/200.
  sigma, the noise of one run's log median, is estimated from the runs themselves and is the largest of
  three figures: (a) the within-run noise, the median over runs of the half-width of each run's
  95% interval of its median (distribution-free, `timing.stats.median_ci`) on the log scale divided by
  1.96; (b) the between-run noise, 1.4826 * MAD of the first differences of the log medians / sqrt(2)
  (a standard estimator robust to the steps themselves: one step moves one difference); (c) a floor of
  `SIGMA_FLOOR` (0.2%) so that a series of identical numbers does not make every wiggle a change.
  (a) alone would be too small: processes on the same machine differ more than one process's samples say.
- Minimum effect: a change PELT finds is kept only when the levels (medians of the log medians) of the
  segments on either side differ by more than `min_effect` (default 5%); the change with the smallest
  effect is dropped and the segments merged until every remaining change passes, so noise and drifts
  below what matters never make change points. A single run in the middle of the series that PELT makes
  its own segment while the runs on either side of it stay within the minimum effect of each other is an
  excursion (one slow process, a busy machine), not a change of level: both of its change points are
  dropped. A single *newest* run is kept as its own segment: that is how a fresh regression looks.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

#: The default smallest step that counts as a change (a ratio: 0.05 = 5%).
DEFAULT_MIN_EFFECT = 0.05
#: Penalty multiplier (module doc: modified BIC rather than BIC's 2).
PENALTY_BETA = 3.0
#: Smallest noise level assumed (on the log scale: 0.2%).
SIGMA_FLOOR = 0.002
#: z of a two-sided 95% interval (the stored interval of each median is a 95% one).
Z_95 = 1.959963984540054
#: Scale of the MAD to a normal standard deviation.
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Detection:
    """Where a series changes level: `change_points[i]` is the index of the first point of a new segment."""

    change_points: list[int]
    #: Segments as [start, end) index pairs, covering the series in order.
    segments: list[tuple[int, int]]
    #: Level (median) of each segment, on the original (not log) scale.
    levels: list[float]
    #: Each change's effect: level after / level before - 1 (0.3 = 30% slower).
    effects: list[float]
    sigma: float
    penalty: float
    #: Changes PELT found that were dropped for being smaller than the minimum effect.
    dropped: list[int] = field(default_factory=list)


def noise_sigma(log_values: Sequence[float], log_half_widths: Sequence[float | None]) -> float:
    """The noise of one run's log median (module doc: the largest of within-run, between-run and the floor)."""
    widths = [w / Z_95 for w in log_half_widths if w is not None and math.isfinite(w)]
    within = statistics.median(widths) if widths else 0.0
    diffs = [abs(b - a) for a, b in zip(log_values, log_values[1:], strict=False)]
    between = MAD_TO_SD * statistics.median(diffs) / math.sqrt(2) if len(diffs) >= 2 else 0.0
    return max(within, between, SIGMA_FLOOR)


def detect(values: Sequence[float], half_widths_log: Sequence[float | None] | None = None,
           min_effect: float = DEFAULT_MIN_EFFECT) -> Detection:
    """Change points of a series of positive medians (oldest first); `half_widths_log`: each median's 95%
    interval half-width on the log scale (None where it has none). See the module doc for the method."""
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError("change points need positive finite medians")
    n = len(values)
    logs = [math.log(v) for v in values]
    sigma = noise_sigma(logs, list(half_widths_log) if half_widths_log is not None else [])
    penalty = PENALTY_BETA * sigma**2 * math.log(max(n, 2))
    found: list[int] = []
    if n >= 2:
        import numpy as np
        import ruptures

        algo = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(np.asarray(logs).reshape(-1, 1))
        found = [int(b) for b in algo.predict(pen=penalty)[:-1]]  # the last breakpoint is n itself
    threshold = math.log1p(min_effect)
    kept = _drop_excursions(logs, found, threshold)
    while kept:
        effects = _log_effects(logs, kept)
        smallest = min(range(len(kept)), key=lambda i: abs(effects[i]))
        if abs(effects[smallest]) > threshold:
            break
        kept.pop(smallest)
    segments = _segments(n, kept)
    levels = [math.exp(statistics.median(logs[a:b])) for a, b in segments]
    effects = [math.expm1(e) for e in _log_effects(logs, kept)]
    return Detection(kept, segments, levels, effects, sigma, penalty, [c for c in found if c not in kept])


def _drop_excursions(logs: list[float], change_points: list[int], threshold: float) -> list[int]:
    """Without the change points around one-run segments inside the series whose neighbouring segments' levels
    are within `threshold` (log scale) of each other (module doc)."""
    kept = list(change_points)
    segs = _segments(len(logs), kept)
    for i in range(1, len(segs) - 1):
        (a0, a1), (b0, b1), (c0, c1) = segs[i - 1], segs[i], segs[i + 1]
        if b1 - b0 == 1 and abs(statistics.median(logs[c0:c1]) - statistics.median(logs[a0:a1])) <= threshold:
            kept = [c for c in kept if c not in (b0, b1)]
    return kept


def _segments(n: int, change_points: list[int]) -> list[tuple[int, int]]:
    bounds = [0, *change_points, n]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _log_effects(logs: list[float], change_points: list[int]) -> list[float]:
    """For each change: median of the log values after it minus before it (within the neighbouring segments)."""
    segs = _segments(len(logs), change_points)
    medians = [statistics.median(logs[a:b]) for a, b in segs]
    return [after - before for before, after in zip(medians, medians[1:], strict=False)]


__all__ = ["DEFAULT_MIN_EFFECT", "PENALTY_BETA", "SIGMA_FLOOR", "Detection", "detect", "noise_sigma"]
