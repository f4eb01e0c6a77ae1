"""Compare two runs case by case, for a person and for a CI gate.

Each case (all its repetitions, one worker process each, pooled) gets B/A, the ratio of per-call
times, with a 95% confidence interval and a p-value (`analysis.effect` says how and why), and a verdict
against a minimum effect that matters in practice (`min_effect`, 0.05 = 5%):

- `slower`: the whole interval lies above 1 + min_effect (B takes at least that much longer);
- `faster`: the whole interval lies below 1 / (1 + min_effect) (A takes at least that much longer than
  B; on the log scale the two thresholds are equally far from 1, so swapping A and B swaps the verdict);
- `no change`: the whole interval lies between the two: any change is smaller than the minimum effect;
- `inconclusive`: the interval crosses a threshold: the samples cannot tell (more samples or processes);
- `too few samples`: too few for a 95% interval.

A p-value alone is not a verdict: with hundreds of samples a 1% change is "significant" and still
does not matter. Validity (`metrics.validity`) decides what is compared at all: a `contended` or
`invalid` process is left out, and a case with no other process on a side is `contended` or `invalid`,
never faster or slower; `noisy` processes are compared and the case is marked noisy. Results stored
before validity existed (None) count as valid and are not marked. Other verdicts: `not comparable`
(no successful result on a side), `only in A`, `only in B`.

The machine's drift between the runs (their canaries, `analysis.drift`) widens each compared case's interval
before its verdict: a change the drift could explain is `inconclusive`, with a note; `ci_low`/`ci_high` are the
widened interval, `sample_ci_low`/`sample_ci_high` the one from the processes alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from dlperf.analysis.drift import Drift, local_ratio, machine_drift, widen
from dlperf.analysis.effect import CONFIDENCE, MIN_PROCESSES, estimate
from dlperf.core.result import CaseResult
from dlperf.timing import Measurement

#: The default minimum effect: changes smaller than 5% are "no change".
DEFAULT_MIN_EFFECT = 0.05
#: The verdicts of cases that were compared (they have an interval); the geometric mean is over these.
COMPARED = ("slower", "faster", "no change", "inconclusive")
#: Every verdict, in the order the summary counts them.
VERDICTS = (*COMPARED, "too few samples", "contended", "invalid", "not comparable", "only in A", "only in B")
#: Validities whose processes are left out of a comparison.
NOT_COMPARED = ("contended", "invalid")
#: Resamples and seed of the bootstrap over cases behind the geometric mean's interval (seeded: same output).
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


class ComparisonDoc(TypedDict):
    """A `CaseComparison` as `compare --format json` writes it: its fields, in their order."""

    case_key: str
    verdict: str
    processes_a: int
    processes_b: int
    median_a_s: float | None
    median_b_s: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    method: str | None
    noisy: bool
    notes: list[str]
    validity_a: list[str | None]
    validity_b: list[str | None]
    sample_ci_low: float | None
    sample_ci_high: float | None
    drift_low: float | None
    drift_high: float | None


class SummaryDoc(TypedDict):
    """A `Summary` as `compare --format json` writes it: its fields, in their order."""

    n_compared: int
    geomean: float | None
    ci_low: float | None
    ci_high: float | None
    counts: dict[str, int]
    drift_widened: bool


@dataclass
class CaseComparison:
    """One case of the two runs compared; times are per call, in seconds; `ratio` is B/A (< 1: B faster)."""

    case_key: str
    verdict: str  # one of VERDICTS (module doc)
    processes_a: int = 0  # processes (repetitions) compared on each side
    processes_b: int = 0
    median_a_s: float | None = None  # median of the per-call samples of those processes
    median_b_s: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    method: str | None = None  # samples (Hodges-Lehmann, Mann-Whitney) | processes (per-process medians, Welch)
    noisy: bool = False
    notes: list[str] = field(default_factory=list)  # why not compared, noisy processes, processes left out
    validity_a: list[str | None] = field(default_factory=list)  # per successful process; None: not recorded
    validity_b: list[str | None] = field(default_factory=list)
    sample_ci_low: float | None = None  # the interval from the processes alone, before the drift widened it
    sample_ci_high: float | None = None
    drift_low: float | None = None  # the drift band it was widened by (None: no canary on a side)
    drift_high: float | None = None

    @property
    def label(self) -> str:
        """The verdict as the table prints it, with what it rests on."""
        if self.verdict in NOT_COMPARED:
            text = f"{self.verdict}: not compared"
        elif self.verdict in ("only in A", "only in B"):
            text = f"only in run {self.verdict[-1]}"
        else:
            text = self.verdict
        return text + (f" ({'; '.join(self.notes)})" if self.notes else "")

    def as_dict(self) -> ComparisonDoc:
        return {"case_key": self.case_key, "verdict": self.verdict, "processes_a": self.processes_a,
                "processes_b": self.processes_b, "median_a_s": self.median_a_s, "median_b_s": self.median_b_s,
                "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "p_value": self.p_value,
                "method": self.method, "noisy": self.noisy, "notes": list(self.notes),
                "validity_a": list(self.validity_a), "validity_b": list(self.validity_b),
                "sample_ci_low": self.sample_ci_low, "sample_ci_high": self.sample_ci_high,
                "drift_low": self.drift_low, "drift_high": self.drift_high}


@dataclass
class Summary:
    """Over the compared cases: the geometric mean of B/A with a bootstrap interval over cases, and counts."""

    n_compared: int
    geomean: float | None
    ci_low: float | None
    ci_high: float | None
    counts: dict[str, int]
    drift_widened: bool = False  # the interval includes the machine's drift between the runs

    def as_dict(self) -> SummaryDoc:
        return {"n_compared": self.n_compared, "geomean": self.geomean, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "counts": dict(self.counts), "drift_widened": self.drift_widened}


def verdict(ci_low: float | None, ci_high: float | None, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """faster | slower | no change | inconclusive | too few samples, from B/A's interval (module doc)."""
    if ci_low is None or ci_high is None:
        return "too few samples"
    up = 1.0 + min_effect
    if ci_low > up:
        return "slower"
    if ci_high < 1.0 / up:
        return "faster"
    if ci_low >= 1.0 / up and ci_high <= up:
        return "no change"
    return "inconclusive"


def _per_call(r: CaseResult) -> tuple[float, ...]:
    return Measurement.from_dict(r.measurement or {}).times_s


def _validity(r: CaseResult) -> str:
    return r.m.validity or "valid"


def _excluded_note(side: str, left_out: list[CaseResult], total: int) -> str:
    kinds = sorted({_validity(r) for r in left_out})
    return f"{side}: {len(left_out)} of {total} processes left out ({', '.join(kinds)})"


def _reasons(side: str, rows: list[CaseResult]) -> str:
    reasons = sorted({r.m.validity_reason or "no reason stored" for r in rows})
    return f"{side}: {'; '.join(reasons)}"


def compare_case(key: str, rows_a: list[CaseResult], rows_b: list[CaseResult],
                 min_effect: float = DEFAULT_MIN_EFFECT, drift: Drift | None = None) -> CaseComparison:
    """One case, its repetitions on each side pooled (see `analysis.effect` for how processes count)."""
    if not rows_a or not rows_b:
        return CaseComparison(key, "only in A" if rows_a else "only in B")
    ok_a = [r for r in rows_a if r.ok and r.measurement and r.measurement.get("sample_times_s")]
    ok_b = [r for r in rows_b if r.ok and r.measurement and r.measurement.get("sample_times_s")]
    if not ok_a or not ok_b:
        def statuses(rows: list[CaseResult]) -> str:
            return "/".join(sorted({r.status for r in rows}))
        return CaseComparison(key, "not comparable", notes=[f"{statuses(rows_a)} vs {statuses(rows_b)}"])
    validities = {"validity_a": [r.m.validity for r in ok_a], "validity_b": [r.m.validity for r in ok_b]}
    bad_times = [side for side, ok in (("A", ok_a), ("B", ok_b))
                 if not all(t > 0 and math.isfinite(t) for r in ok for t in _per_call(r))]
    if bad_times:  # a ratio of logs needs positive, finite times
        return CaseComparison(key, "invalid", notes=[f"{side}: sample times not positive and finite"
                                                     for side in bad_times], **validities)
    use_a = [r for r in ok_a if _validity(r) not in NOT_COMPARED]
    use_b = [r for r in ok_b if _validity(r) not in NOT_COMPARED]
    if not use_a or not use_b:
        blocked = [(side, ok) for side, ok, use in (("A", ok_a, use_a), ("B", ok_b, use_b)) if not use]
        worst = "invalid" if any(_validity(r) == "invalid" for _, ok in blocked for r in ok) else "contended"
        return CaseComparison(key, worst, len(use_a), len(use_b),
                              float(np.median(np.concatenate([_per_call(r) for r in ok_a]))),
                              float(np.median(np.concatenate([_per_call(r) for r in ok_b]))),
                              notes=[_reasons(side, ok) for side, ok in blocked], **validities)
    samples_a, samples_b = [_per_call(r) for r in use_a], [_per_call(r) for r in use_b]
    effect = estimate(samples_a, samples_b, CONFIDENCE)
    noisy = [(side, [r for r in use if _validity(r) == "noisy"]) for side, use in (("A", use_a), ("B", use_b))]
    notes = [f"noisy {_reasons(side, rows)}" for side, rows in noisy if rows]
    notes += [_excluded_note(side, [r for r in ok if _validity(r) in NOT_COMPARED], len(ok))
              for side, ok, use in (("A", ok_a, use_a), ("B", ok_b, use_b)) if len(use) < len(ok)]
    low, high, band = effect.ci_low, effect.ci_high, (None, None)
    if drift is not None and low is not None and high is not None:
        low, high, *band = widen(low, high, drift, local_ratio(use_a, use_b))
        before = verdict(effect.ci_low, effect.ci_high, min_effect)
        if before in ("faster", "slower") and verdict(low, high, min_effect) != before:
            notes.append(f"{before} by the processes alone, but within the machine's drift (canary x{band[0]:.3f} "
                         f"to x{band[1]:.3f}): cannot separate the change from it")
    return CaseComparison(
        key, verdict(low, high, min_effect), len(use_a), len(use_b),
        float(np.median(np.concatenate(samples_a))), float(np.median(np.concatenate(samples_b))),
        effect.ratio, low, high, effect.p_value, effect.method,
        noisy=any(rows for _, rows in noisy), notes=notes, **validities, sample_ci_low=effect.ci_low,
        sample_ci_high=effect.ci_high, drift_low=band[0], drift_high=band[1])


def compare_runs(results_a: Sequence[CaseResult], results_b: Sequence[CaseResult],
                 min_effect: float = DEFAULT_MIN_EFFECT, drift: Drift | str | None = None) -> list[CaseComparison]:
    """One comparison per case key (all repetitions of a case together), in key order; a case present in
    only one run is listed as such. `drift`: the machine's drift between the runs (`analysis.drift`; None: found
    here from the runs' canaries; a string: none, and why)."""
    if drift is None:
        drift = machine_drift(results_a, results_b)
    by_a: dict[str, list[CaseResult]] = defaultdict(list)
    by_b: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results_a:
        by_a[r.case_key].append(r)
    for r in results_b:
        by_b[r.case_key].append(r)
    usable = drift if isinstance(drift, Drift) else None
    return [compare_case(key, by_a.get(key, []), by_b.get(key, []), min_effect, usable)
            for key in sorted(set(by_a) | set(by_b))]


def summarize(rows: Sequence[CaseComparison], drift: Drift | None = None) -> Summary:
    """The geometric mean of B/A over the compared cases (`COMPARED`) and its 95% interval by a seeded
    bootstrap over cases (the spread from case to case; none below 3 cases), plus every verdict's count.
    `drift` (the machine's, between the runs) moves every case alike, so no spread between cases shows it: the
    interval is widened by its band, as each case's is."""
    counts: dict[str, int] = defaultdict(int)
    for c in rows:
        counts[c.verdict] += 1
    logs = np.array([math.log(c.ratio) for c in rows if c.verdict in COMPARED and c.ratio])
    if logs.size == 0:
        return Summary(0, None, None, None, dict(counts))
    geomean = math.exp(float(logs.mean()))
    if logs.size < MIN_PROCESSES:
        return Summary(int(logs.size), geomean, None, None, dict(counts))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = logs[rng.integers(0, logs.size, size=(BOOTSTRAP_RESAMPLES, logs.size))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    low, high = math.exp(float(lo)), math.exp(float(hi))
    if drift is not None:
        low, high, *_ = widen(low, high, drift, None)
    return Summary(int(logs.size), geomean, low, high, dict(counts), drift is not None)


def one_process_a_side(rows: Sequence[CaseComparison]) -> list[CaseComparison]:
    """The compared cases with one process on each side: their interval holds that process's samples only."""
    return [c for c in rows if c.verdict in COMPARED and c.method == "samples"]


def regressions(rows: Sequence[CaseComparison], threshold_pct: float) -> list[CaseComparison]:
    """The compared cases (not contended, not invalid) whose whole B/A interval lies above 1 + threshold_pct/100."""
    limit = 1.0 + threshold_pct / 100
    return [c for c in rows if c.verdict in COMPARED and c.ci_low is not None and c.ci_low > limit]
