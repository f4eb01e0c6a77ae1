"""The machine's drift between two runs, seen by their canaries (`runner.canary`), and how it enters a comparison.

A case's B/A interval, built from the processes of each run, says how sure the two runs differ; it does not say
whether the code or the machine changed. The canary (fixed work, timed between cases) answers the second: its B/A
is how much faster or slower the machine itself was. The comparison WIDENS each case's interval by the drift (it
does not divide by it: the canary is one memory-bound and one compute-bound part, and a case need not slow down
as it does):

    band = [min(1, m_low, m_case), max(1, m_high, m_case)]
    widened B/A interval = [ci_low / band_high, ci_high / band_low]

where [m_low, m_high] is the 95% interval of the canary's B/A over the two runs (Hodges-Lehmann on log times, as
`analysis.effect` does for samples) and m_case the canary's B/A around the case's own processes (the canary just
before and after each, so a case that ran in a slow minute of one run is judged by that minute). A change the
drift could explain is then `inconclusive` (the notes say the drift could explain it), never faster or slower; a
change beyond the drift keeps its verdict. Runs stored before the canary existed have none: their intervals are
left as they were, with a note that the drift is not in them. On a fleet the canaries of each machine are taken
over that machine's median across both runs, on the machines both runs used (machines differ in speed; their
drift is what moves), and m_case is the canary of the machines that ran the case's processes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlperf.analysis.effect import CONFIDENCE, hodges_lehmann
from dlperf.core.result import CaseResult
from dlperf.runner.canary import local_times, normalized, run_series


@dataclass(frozen=True)
class Drift:
    """The machine's speed in run B over run A by the canary: ratio (> 1: B's machine slower) and its interval."""

    ratio: float
    low: float
    high: float
    n_a: int
    n_b: int

    def line(self) -> str:
        return (f"machine drift by the canary: B/A {self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}] ({self.n_a} vs "
                f"{self.n_b} canary times); each case's interval is widened by it (and by the canary around the "
                f"case's own processes): a change the drift could explain is not called faster or slower")


def machine_drift(results_a: Sequence[CaseResult], results_b: Sequence[CaseResult]) -> Drift | str:
    """The canary's B/A over the two runs, or why there is none (one line)."""
    series_a, series_b = run_series(results_a), run_series(results_b)
    missing = [side for side, s in (("A", series_a), ("B", series_b)) if not s]
    if missing:
        return (f"no canary in run {' and '.join(missing)} (stored before dlperf measured one): "
                f"the machine's drift between the runs is not in the intervals")
    if {c.kind for c in series_a} != {c.kind for c in series_b}:
        return "the two runs' canaries did different work (another dlperf version): the drift is not in the intervals"
    hosts_a, hosts_b = {c.host for c in series_a}, {c.host for c in series_b}
    if None in hosts_a | hosts_b or hosts_a == hosts_b and len(hosts_a) == 1:  # a side that names no machine
        # (a local sweep's canaries): pooled, as before fleets named theirs
        log_a = np.log([c.time_s for c in series_a])
        log_b = np.log([c.time_s for c in series_b])
    else:  # a fleet: each machine against its own median over both runs, on the machines both runs used
        common = hosts_a & hosts_b
        if not common:
            return ("the two runs' canaries ran on different machines (a fleet placed them apart): the drift is not in "
                    "the intervals")
        series_a = [c for c in series_a if c.host in common]
        series_b = [c for c in series_b if c.host in common]
        both = [*series_a, *series_b]
        medians = {h: statistics.median(c.time_s for c in both if c.host == h) for h in common}
        log_a, log_b = np.log(normalized(series_a, medians)), np.log(normalized(series_b, medians))
    shift, lo, hi = hodges_lehmann(log_a, log_b, CONFIDENCE)
    if lo is None or hi is None:  # too few canary times for a 95% interval: the widest the times allow
        lo, hi = float(log_b.min() - log_a.max()), float(log_b.max() - log_a.min())
    return Drift(math.exp(shift), math.exp(lo), math.exp(hi), len(series_a), len(series_b))


def local_ratio(rows_a: Sequence[CaseResult], rows_b: Sequence[CaseResult]) -> float | None:
    """The canary's B/A around these processes (geometric means of the canaries bracketing each); None where a
    side has none."""
    a, b = local_times(rows_a), local_times(rows_b)
    if not a or not b:
        return None
    return math.exp(float(np.mean(np.log(b)) - np.mean(np.log(a))))


def widen(ci_low: float, ci_high: float, drift: Drift, local: float | None) -> tuple[float, float, float, float]:
    """(low, high, band_low, band_high): the interval widened by the drift band (module doc)."""
    band_low = min(1.0, drift.low, *([local] if local else []))
    band_high = max(1.0, drift.high, *([local] if local else []))
    return ci_low / band_high, ci_high / band_low, band_low, band_high


__all__ = ["Drift", "local_ratio", "machine_drift", "widen"]
