"""How noisy the machine was during a run, in plain words, for the run's summary (`run`, `show`, `report`, the HTML
page): the canary's spread and drift (`runner.canary`), and whether the run as a whole should be trusted.

A run stored before the canary existed prints no canary line (its rows hold none); its noisy cases still count.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlperf.core.result import CaseResult
from dlperf.runner.canary import run_series, stats

#: A run is called noisy where at least this share of its successful cases was judged `noisy`.
NOISY_SHARE = 0.5


def noise_lines(results: Sequence[CaseResult]) -> list[str]:
    """The canary's line (where the run has one) and, where the machine was noisy, one line that says so."""
    series = run_series(results)
    canary = stats(series)
    lines = [canary.line()] if canary is not None else []
    ok = [r for r in results if r.ok and r.m.median_s]
    noisy = [r for r in ok if r.m.validity == "noisy"]
    why = []
    if canary is not None and canary.unstable:
        why.append(f"the canary's time moved by {canary.spread_rel:.0%}: other processes here, or disturbance from "
                   "outside the guest that contention and steal do not see")
    if len(ok) >= 2 and len(noisy) >= NOISY_SHARE * len(ok):
        why.append(f"{len(noisy)} of {len(ok)} cases were noisy")
    if why:
        lines.append(f"THIS MACHINE WAS NOISY during the run ({'; '.join(why)}): its figures may differ from "
                     "another run's by as much; rerun on a quiet machine, or with --precision PCT (more processes "
                     "per case); compare counts the canary's drift")
    return lines


__all__ = ["NOISY_SHARE", "noise_lines"]
