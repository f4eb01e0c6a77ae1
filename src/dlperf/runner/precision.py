"""The precision a case reached across its worker processes, and the policy that runs more processes until it
reaches a stated one (`dlperf run --precision 5%`; pyperf's `--rigorous` idea, driven by the interval instead of
a fixed count).

A case's figure across processes is the geometric mean of its processes' medians (what `compare` compares with
3 or more processes per side: `analysis.effect`). Its precision is the half-width of that figure's 95% interval,
relative: Student's t over the log medians, exp(t * sd / sqrt(k)) - 1 for k processes. (A distribution-free
interval of the median of medians needs 6 processes for 95% coverage; the t interval on log medians exists from
2, and is the one compare's per-process verdict rests on.) One process has no precision across processes: what
differs from one process to the next (a core, a memory layout, a moment) is unseen.

The policy: after the study's planned processes, every case whose interval is wider than the target (or has fewer
than `MIN_MEDIANS` usable processes) gets one more process, in rounds (A C A C: the imprecise cases interleaved, as the
planned repetitions are), until each case is precise enough, has `max_processes`, or the run's extra time budget
is spent. A process that failed, or was contended or invalid, counts toward the cap but not in the interval.
Each stored row holds the precision its case had once it landed (`metrics.precision`), so the last row of a case
holds the precision reached.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

#: `--max-processes` where none is given: a case never runs in more worker processes than this.
DEFAULT_MAX_PROCESSES = 10
#: A case reaches its target only with this many usable medians. Two that agree by chance (within 0.8% of each
#: other is ±5%, at t = 12.7) say little of how far a third would land, and stopping on them would report a
#: precision the case does not have; three is also what `compare` needs on each side to compare processes
#: (`analysis.effect.MIN_PROCESSES`).
MIN_MEDIANS = 3
#: Validities whose processes are not counted (as compare leaves them out).
NOT_COUNTED = ("contended", "invalid")


def interval_rel(medians_s: Sequence[float]) -> float | None:
    """The relative half-width of the 95% interval of the geometric mean of these per-process medians (module
    doc); None below 2 medians or where one is not positive and finite."""
    if len(medians_s) < 2 or not all(m > 0 and math.isfinite(m) for m in medians_s):
        return None
    from scipy.special import stdtrit  # Student's t quantile: scipy.stats' import costs every run ~0.5 s of CPU

    logs = [math.log(m) for m in medians_s]
    k = len(logs)
    half = float(stdtrit(k - 1, 0.975)) * statistics.stdev(logs) / math.sqrt(k)
    return math.expm1(half)


def usable_median(row: Any) -> float | None:
    """A stored row's median when it counts toward its case's precision (ok, not contended nor invalid)."""
    if not row.ok or row.m.validity in NOT_COUNTED:
        return None
    median = row.m.median_s
    return float(median) if median and median > 0 else None


@dataclass(frozen=True)
class PrecisionTarget:
    """What `--precision` asks: the relative half-width to reach, the most processes per case, and the extra
    wall time (seconds) the whole run may spend on added processes (None: as long as its planned ones took)."""

    rel: float
    max_processes: int = DEFAULT_MAX_PROCESSES
    budget_s: float | None = None


@dataclass
class CaseState:
    """A case's processes so far: the usable medians, and how many processes ran (the next repetition index)."""

    medians_s: list[float] = field(default_factory=list)
    processes: int = 0

    @property
    def precision_rel(self) -> float | None:
        return interval_rel(self.medians_s)

    def precise(self, target_rel: float) -> bool:
        reached = self.precision_rel
        return len(self.medians_s) >= MIN_MEDIANS and reached is not None and reached <= target_rel


@dataclass(frozen=True)
class Reached:
    """How the policy left one case: its processes, its precision, and why it stopped."""

    processes: int
    precision_rel: float | None
    stopped: str  # reached | cap | budget


class StoredPrecision(TypedDict):
    """A row's `metrics.precision`: the relative precision reached over how many processes, how many of their
    medians were usable, and, where the run set one, the target and its process cap."""

    reached_rel: float | None
    processes: int
    usable: int
    target_rel: NotRequired[float]
    max_processes: NotRequired[int]


def stored_precision(state: CaseState, target: PrecisionTarget | None) -> StoredPrecision:
    """What a row stores as `metrics.precision` once it has landed (its case's state including it)."""
    out: StoredPrecision = {"reached_rel": state.precision_rel, "processes": state.processes,
                            "usable": len(state.medians_s)}
    if target is not None:
        out["target_rel"] = target.rel
        out["max_processes"] = target.max_processes
    return out


def reach_precision(states: dict[str, CaseState], run_more: Callable[[str, int], float | None],
                    target: PrecisionTarget, budget_s: float, clock: Callable[[], float] = time.monotonic,
                    ) -> dict[str, Reached]:
    """Run more processes of the cases in `states` (in its order) until each reaches `target` (module doc).
    `run_more(key, repetition)` runs and stores one more process and returns its usable median (None where it
    does not count); `states` is updated as processes land. `budget_s`: the extra seconds, by `clock`."""
    start = clock()
    out_of_budget = False
    while not out_of_budget:
        todo = [k for k, s in states.items() if not s.precise(target.rel) and s.processes < target.max_processes]
        if not todo:
            break
        for key in todo:
            if clock() - start >= budget_s:
                out_of_budget = True
                break
            state = states[key]
            median = run_more(key, state.processes)
            state.processes += 1
            if median is not None:
                state.medians_s.append(median)
    return {k: Reached(s.processes, s.precision_rel,
                       "reached" if s.precise(target.rel) else "cap" if s.processes >= target.max_processes
                       else "budget") for k, s in states.items()}


def _pct(rel: float) -> str:
    """A precision as printed: '±3.1%', or '>±100%' (two processes that differ give t = 12.7: a huge interval)."""
    return f"±{rel:.1%}" if rel <= 1 else ">±100%"


def precision_text(rows: Sequence[Any]) -> str:
    """A case's precision as the repetitions table shows it, from its rows: '±3.1%', with the target and how the
    policy ended where one was set ('±7.2% (target 5%: cap 10)'); with fewer than two usable processes, the
    interval of all of them marked 'incl. contended'; '-' where it has none."""
    medians = [m for m in (usable_median(r) for r in rows) if m is not None]
    reached = interval_rel(medians)
    text = _pct(reached) if reached is not None else "-"
    if reached is None:  # under two usable processes: what all of them say, marked as such
        every = interval_rel([float(r.m.median_s) for r in rows if r.ok and r.m.median_s and r.m.median_s > 0])
        text = f"{_pct(every)} incl. contended" if every is not None else text
    asked = [r.m.get("precision") for r in rows if isinstance(r.m.get("precision"), dict)]
    targets = [a["target_rel"] for a in asked if a.get("target_rel")]
    if not targets:
        return text
    goal, cap = targets[-1], max(a.get("max_processes") or 0 for a in asked)
    if CaseState(medians, len(rows)).precise(goal):  # as the policy judges it
        return f"{text} (target {goal * 100:g}%: reached)"
    why = f"cap {cap}" if len(rows) >= cap else "budget spent"
    return f"{text} (target {goal * 100:g}%: {why})"


__all__ = ["DEFAULT_MAX_PROCESSES", "CaseState", "PrecisionTarget", "Reached", "interval_rel", "precision_text",
           "reach_precision", "stored_precision", "usable_median"]
