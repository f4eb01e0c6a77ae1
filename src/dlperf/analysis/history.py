"""The history of one study: its runs on each machine over time, change points per case, a regression gate.

Given the runs of one study (complete, interrupted or failed, with their results and environments), the
runs are grouped by machine (`analysis.machines`: the hardware part of the environment; never two machines
in one timeline) and ordered by start time. A framework upgrade, a new dlperf version or commit, another
kernel stays on the machine's timeline and is marked on the run where it first appears. A run whose results
came from several machines (a fleet run: each result row's `env_id` is the machine that ran it) is split by
`analysis.machines.split_by_machine`: each machine's share is a run on that machine's timeline, so samples
of two machines are never pooled into one point, and the gate judges each machine's share on its own.

Per case and run, one point: the median time per step (per call) of the case's successful processes,
pooled (the raw samples of every repetition of the case in that run, as `compare` pools them), with the
distribution-free 95% interval of that median (`timing.stats.median_ci`, what `Metrics.ci95_low_s` /
`ci95_high_s` hold for one process). Processes judged `contended` or `invalid` (core.validity) are left
out; a run whose every process of the case was left out, or failed, gives a point that is shown but used
neither for change points nor as a baseline. The thread count is a setting, not the machine: where a
case ran with different thread counts on one machine (`dlperf run` picks them from the idle cores unless
told), each count is its own series ("KEY [threads=N]"), so 1 thread is never compared with 2.

Change points: `analysis.changepoints.detect` (PELT, l2 on log medians; its doc says the penalty and why)
over a case's usable points. The newest run is checked against the segment before the last change point
(the runs before it where there is none): `slower` when newest/baseline - 1 exceeds the threshold (the
gate's --fail-on-regression PCT, else the minimum effect) *and* the newest interval lies wholly above the
baseline's (the median of the baseline runs' interval ends: a typical run's interval at that level);
`faster` symmetrically; `no change` within the threshold; `inconclusive` beyond it with overlapping
intervals. The gate fails on `slower`, and closed on a newest run whose case could not be checked
(contended, invalid or failed where earlier runs had a usable point), as `compare`'s gate does.

The machine drifts between runs: where the newest run and its baseline runs stored canaries (`runner.canary`,
timed before and after each process), the canary's newest/baseline ratio m around the case's processes widens
the check as `compare` widens its intervals (`analysis.drift`): `slower` needs the ratio and the newest interval
beyond max(1, m) times the threshold and the baseline's interval, `faster` beyond min(1, m); a change the drift
could explain is `inconclusive`. Runs without a canary are checked as before.

Runs differ by more than their own intervals say: each holds its processes' samples, while what moves from one
run to the next (the machine's state, where the processes landed) shows only across runs. With three or more
baseline runs, the 95% prediction interval of one more run from their log medians (`run_to_run`) widens the
check the same way: `slower` needs the newest beyond it too. With fewer (`SPREAD_MIN_RUNS`) that spread is not
estimated, and the check's reason says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dlperf.analysis.changepoints import DEFAULT_MIN_EFFECT, Detection, detect
from dlperf.analysis.machines import MachineShare, software, software_changes, split_by_machine
from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.errors import DlperfError
from dlperf.hardware.identity import LABEL_KEY, describe_machine, machine_label
from dlperf.runner.canary import local_times
from dlperf.store.rows import RunRow
from dlperf.timing import Measurement
from dlperf.units import format_time

#: The metrics history follows (the option --metric): name -> what it is.
METRICS = {"time": "median time per step (per call), seconds"}
#: Validities whose processes are left out (as in analysis.compare).
LEFT_OUT = ("contended", "invalid")


@dataclass(frozen=True)
class RunInfo:
    """One run on a timeline: number (1 = oldest on this machine), status, software, what changed before it."""

    run_id: str
    number: int
    started_at: datetime
    status: str
    software: dict[str, str]
    #: (field, old, new) against the previous run on this machine; [] for the first.
    changes: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    #: How many machines the run's results came from (> 1: a fleet run; this timeline holds this machine's share).
    machines: int = 1


@dataclass(frozen=True)
class Point:
    """One case in one run: the pooled median and its 95% interval, or why there is none."""

    run_index: int
    status: str  # the case's status (ok, error, timeout, ...), or "not run" where the run holds no such case
    median_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    validity: str | None = None
    processes: int = 0
    usable: bool = False
    reason: str | None = None
    #: The geometric mean of the canary times around the case's processes in this run (None: no canary stored).
    canary_s: float | None = None

    def median_text(self) -> str:
        """The median with its 95% interval, as the tables print it ('2.05 ms [2.04 ms, 2.06 ms]')."""
        if self.median_s is None:
            return self.status
        ci = f" [{format_time(self.ci_low_s)}, {format_time(self.ci_high_s)}]" if self.ci_low_s is not None else ""
        return format_time(self.median_s) + ci


@dataclass(frozen=True)
class NewestCheck:
    """The newest run of a case against its baseline (module doc)."""

    verdict: str  # slower, faster, no change, inconclusive, could not check, no baseline, not in newest run
    regression: bool = False
    ratio: float | None = None
    baseline_runs: list[int] = field(default_factory=list)  # run numbers
    baseline_median_s: float | None = None
    baseline_low_s: float | None = None
    baseline_high_s: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class CaseHistory:
    case_key: str
    points: list[Point]
    detection: Detection | None
    #: The run number (RunInfo.number) at which each change point starts a new level.
    change_runs: list[int]
    newest: NewestCheck


@dataclass(frozen=True)
class Timeline:
    """The runs of one study on one machine, oldest first, and each case's history on it."""

    machine_id: str
    label: str
    identity: str
    runs: list[RunInfo]
    cases: list[CaseHistory]


@dataclass(frozen=True)
class StudyHistory:
    study: str
    metric: str
    min_effect: float
    fail_pct: float | None
    timelines: list[Timeline]

    def failures(self) -> list[tuple[Timeline, CaseHistory]]:
        """The cases that fail the gate (a regression, or a newest run that could not be checked)."""
        return [(t, c) for t in self.timelines for c in t.cases if c.newest.regression]


def pooled_point(run_index: int, reps: Sequence[CaseResult]) -> Point:
    """A case's point in one run from its repetitions (module doc)."""
    if not reps:
        return Point(run_index, "not run")
    ok = [r for r in reps if r.ok and r.measurement and r.measurement.get("sample_times_s")]
    if not ok:
        failed = next((r for r in reps if not r.ok), reps[0])
        return Point(run_index, failed.status, reason=failed.reason, processes=len(reps))
    usable = [r for r in ok if r.m.validity not in LEFT_OUT]
    chosen = usable or ok
    times: list[float] = []
    iters: list[int] = []
    for r in chosen:
        times += list(r.measurement["sample_times_s"])  # type: ignore[index]
        iters += list(r.measurement.get("sample_iters") or [1] * len(r.measurement["sample_times_s"]))  # type: ignore[union-attr,index]
    pooled = Measurement(tuple(times), tuple(iters))
    ci = pooled.ci95_s
    validities = [r.m.validity for r in chosen]
    if not usable:
        validity = "invalid" if "invalid" in validities else "contended"
        reason = next((r.m.validity_reason for r in chosen if r.m.validity_reason), None)
    else:
        validity = "noisy" if "noisy" in validities or pooled.noisy else ("valid" if any(validities) else None)
        reason = None
    canaries = local_times(chosen)
    canary_s = math.exp(statistics.fmean(math.log(t) for t in canaries)) if canaries else None
    return Point(run_index, "ok", pooled.median_s, ci[0] if ci else None, ci[1] if ci else None, validity,
                 len(chosen), bool(usable), reason, canary_s)


def check_newest(points: list[Point], runs: list[RunInfo], detection: Detection | None, used: list[int],
                 threshold_pct: float, gate: bool) -> NewestCheck:
    """The newest run's point against the segment before the last change point (module doc).
    `used`: the indices (into `points`) of the usable points the detection ran over."""
    newest = points[-1]
    if newest.status == "not run":
        return NewestCheck("not in newest run", reason="the newest run holds no result of this case")
    earlier = [i for i in used if i < len(points) - 1]
    if not newest.usable:
        why = f"newest run {newest.validity or newest.status}" + (f": {newest.reason}" if newest.reason else "")
        if not earlier:
            return NewestCheck("no baseline", reason=why)
        return NewestCheck("could not check", regression=gate, reason=why)
    if not earlier:
        return NewestCheck("no baseline", reason="no earlier usable run of this case on this machine")
    assert detection is not None
    pos = len(used) - 1  # the newest point's position in the detected series
    starts = [0, *detection.change_points]
    last = max(s for s in starts if s <= pos)
    base_pos = list(range(starts[starts.index(last) - 1], last)) if last > 0 else list(range(pos))
    base = [points[used[p]] for p in base_pos]
    median = math.exp(statistics.median(math.log(p.median_s) for p in base))  # type: ignore[arg-type]
    low = statistics.median(p.ci_low_s if p.ci_low_s is not None else p.median_s for p in base)  # type: ignore[type-var]
    high = statistics.median(p.ci_high_s if p.ci_high_s is not None else p.median_s for p in base)  # type: ignore[type-var]
    ratio = newest.median_s / median  # type: ignore[operator]
    n_low = newest.ci_low_s if newest.ci_low_s is not None else newest.median_s
    n_high = newest.ci_high_s if newest.ci_high_s is not None else newest.median_s
    up = 1 + threshold_pct / 100
    drift = _drift(newest, base)
    spread = run_to_run(base)
    band_low = min(1.0, drift or 1.0) / (spread or 1.0)
    band_high = max(1.0, drift or 1.0) * (spread or 1.0)
    if ratio > up:
        verdict = "slower" if n_low > high * band_high and ratio > up * band_high else "inconclusive"  # type: ignore[operator]
    elif ratio < 1 / up:
        verdict = "faster" if n_high < low * band_low and ratio < band_low / up else "inconclusive"  # type: ignore[operator]
    else:
        verdict = "no change"
    why = f"threshold {threshold_pct:g}%"
    if drift is not None:
        why += f"; machine drift by the canary x{drift:.3f} (newest/baseline), allowed for"
    if spread is not None:
        why += (f"; run-to-run spread of the {len(base)} baseline runs x{spread:.3f} (95% prediction of one more "
                "run), allowed for")
    else:
        why += f"; run-to-run spread not estimated ({len(base)} baseline run{'s' if len(base) != 1 else ''}, under "
        why += f"{SPREAD_MIN_RUNS})"
    numbers = [runs[points[used[p]].run_index].number for p in base_pos]
    return NewestCheck(verdict, regression=gate and verdict == "slower", ratio=ratio, baseline_runs=numbers,
                       baseline_median_s=median, baseline_low_s=low, baseline_high_s=high, reason=why)


#: The fewest baseline runs whose spread widens the gate: over 2, t at 1 degree of freedom is 12.7, and two runs 2%
#: apart would hold a 10% gate off a 37% slowdown (3 runs: t = 4.3).
SPREAD_MIN_RUNS = 3


def run_to_run(base: Sequence[Point]) -> float | None:
    """How far one more run may land from the baseline runs by their spread alone: exp of the half-width of the
    95% prediction interval of one log median (Student's t with k - 1 degrees of freedom, sd of the k baseline
    runs' log medians, x sqrt(1 + 1/k)); None below `SPREAD_MIN_RUNS` runs. Each run's own interval holds its
    processes' samples: what moves between runs (the machine's state, where the processes landed) shows only here."""
    logs = [math.log(p.median_s) for p in base if p.median_s and p.median_s > 0]
    if len(logs) < SPREAD_MIN_RUNS:
        return None
    from scipy.special import stdtrit

    k = len(logs)
    return math.exp(float(stdtrit(k - 1, 0.975)) * statistics.stdev(logs) * math.sqrt(1 + 1 / k))


def _drift(newest: Point, base: Sequence[Point]) -> float | None:
    """The canary's newest/baseline ratio around the case's processes (None where a run lacks a canary)."""
    if newest.canary_s is None or not base or any(p.canary_s is None for p in base):
        return None
    return newest.canary_s / math.exp(statistics.median(math.log(p.canary_s) for p in base))  # type: ignore[arg-type]


def case_history(key: str, points: list[Point], runs: list[RunInfo], min_effect: float,
                 fail_pct: float | None) -> CaseHistory:
    """One case on one timeline: change points over its usable points, and the newest run's check."""
    used = [i for i, p in enumerate(points) if p.usable and p.median_s and p.median_s > 0]
    detection = None
    if used:
        values = [points[i].median_s for i in used]
        halves = [_log_half_width(points[i]) for i in used]
        detection = detect(values, halves, min_effect)  # type: ignore[arg-type]
    change_runs = [runs[points[used[c]].run_index].number for c in detection.change_points] if detection else []
    threshold = fail_pct if fail_pct is not None else min_effect * 100
    newest = check_newest(points, runs, detection, used, threshold, fail_pct is not None)
    return CaseHistory(key, points, detection, change_runs, newest)


def _log_half_width(p: Point) -> float | None:
    if p.ci_low_s is None or p.ci_high_s is None or p.ci_low_s <= 0:
        return None
    return (math.log(p.ci_high_s) - math.log(p.ci_low_s)) / 2


def build_history(study: str, runs: Sequence[RunRow], envs: Mapping[str, Environment],
                  results: Mapping[str, Sequence[CaseResult]], *, min_effect: float = DEFAULT_MIN_EFFECT,
                  fail_pct: float | None = None, case_filter: str | None = None, machine: str | None = None,
                  metric: str = "time", result_envs: Mapping[int, Environment] | None = None) -> StudyHistory:
    """The history of `study` from its runs (store rows), their environments (`Store.run_environment`, by run
    id), typed results (by run id) and every environment the results name (`result_envs`, by env id; the
    machine that ran each: `cli.readers.result_environments`; None: only the runs' own, so a result of another
    machine is a KeyError, never pooled). `case_filter`: only case keys containing it; `machine`: only the
    machine whose label is it, else whose id starts with it. Unknown study, machine or case: DlperfError."""
    if metric not in METRICS:
        raise DlperfError(f"--metric {metric!r}: history follows {', '.join(METRICS)}")
    if not runs:
        raise DlperfError(f"no runs of study {study!r} in this store (see 'dlperf runs')")
    known_envs = result_envs if result_envs is not None else {int(r.env_id): envs[r.id] for r in runs}
    by_machine: dict[str, list[tuple[RunRow, MachineShare, int]]] = {}
    for run in sorted(runs, key=lambda r: (r.started_at, r.id)):
        shares = split_by_machine(results.get(run.id, []), known_envs, int(run.env_id), envs[run.id])
        for share in shares:
            by_machine.setdefault(share.machine_id, []).append((run, share, len(shares)))
    if machine is not None:
        chosen = {m: es for m, es in by_machine.items() if es[-1][1].env.get(LABEL_KEY) == machine} or {
            m: es for m, es in by_machine.items() if m.startswith(machine)}
        if len(chosen) != 1:
            known = ", ".join(f"{m} ({es[-1][1].label})" for m, es in by_machine.items())
            what = "matches no machine" if not chosen else "matches several machines"
            raise DlperfError(f"--machine {machine!r} {what} of study {study!r}; its machines: {known}")
        by_machine = chosen
    timelines = [_timeline(mid, entries, min_effect, fail_pct, case_filter) for mid, entries in by_machine.items()]
    if case_filter is not None and not any(t.cases for t in timelines):
        raise DlperfError(f"--case {case_filter!r}: no case of study {study!r} has a key containing it")
    timelines.sort(key=lambda t: t.runs[-1].started_at, reverse=True)  # the machine run on last first
    return StudyHistory(study, metric, min_effect, fail_pct, timelines)


def _timeline(mid: str, entries: list[tuple[RunRow, MachineShare, int]], min_effect: float,
              fail_pct: float | None, case_filter: str | None) -> Timeline:
    """One machine's timeline from its runs' shares (run row, this machine's share, the run's machine count)."""
    infos: list[RunInfo] = []
    for i, (run, share, n_machines) in enumerate(entries):
        soft = software(share.env)
        changes = software_changes(infos[-1].software, soft) if infos else []
        infos.append(RunInfo(run.id, i + 1, run.started_at, str(run.status), soft, changes, n_machines))
    grouped: dict[tuple[int, str, Any], list[CaseResult]] = {}
    for i, (_, share, _) in enumerate(entries):
        run_threads = share.env.get("threads")
        for r in share.results:
            grouped.setdefault((i, r.case_key, r.m.threads if r.m.threads is not None else run_threads), []).append(r)
    series = sorted({(key, threads) for _, key, threads in grouped if case_filter is None or case_filter in key},
                    key=lambda s: (s[0], str(s[1])))
    varied = {key for key, _ in series if sum(1 for k, _ in series if k == key) > 1}
    cases = []
    for key, threads in series:
        points = [pooled_point(i, grouped.get((i, key, threads), [])) for i in range(len(entries))]
        shown = f"{key} [threads={threads}]" if key in varied else key
        cases.append(case_history(shown, points, infos, min_effect, fail_pct))
    env = entries[-1][1].env
    return Timeline(mid, machine_label(env), describe_machine(env), infos, cases)


__all__ = ["METRICS", "CaseHistory", "NewestCheck", "Point", "RunInfo", "StudyHistory", "Timeline",
           "build_history", "case_history", "check_newest", "pooled_point"]
