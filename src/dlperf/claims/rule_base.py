"""What every rule is built on: the Outcome a rule answers, the registry `RULES` and its decorators (`rule`,
`per_run`), and the helpers the rules of every study share (`not_run`, `judge_band`). Below `rules` and
`rules_cnn`, so that the two do not import each other."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dlperf.analysis.picking import CannotCheck, Trail
from dlperf.claims.claim import Claim
from dlperf.report.study import ReportData
from dlperf.report.verdict import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS


@dataclass(frozen=True)
class Outcome:
    """A rule's answer: the verdict, the measured figure for display, the detail, the runs it rests on."""

    verdict: str
    measured: str | None
    detail: str
    run_ids: tuple[str, ...] = ()


Rule = Callable[[Claim, list[ReportData]], Outcome]
#: Judged per run: (claim, one run, its trail) -> (verdict, measured, detail); raises CannotCheck.
RunRule = Callable[[Claim, ReportData, Trail], tuple[str, str, str]]
RULES: dict[str, Rule] = {}


def rule(name: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES[name] = fn
        return fn
    return register


def runs_with(datas: list[ReportData], workload: str) -> list[ReportData]:
    """The given runs that hold cases of this workload, in the order given."""
    return [d for d in datas if any(r.workload == workload for r in d.results)]


def fmt_x(value: float) -> str:
    """A ratio as the tables print it: 3 significant figures and an x."""
    return f"{value:.3g}x"


def not_run(claim: Claim, datas: Sequence[ReportData] = ()) -> str:
    """Why no run given holds the claim's workload: none of its study was given, or the ones given stored no
    case of it (an empty or aborted run)."""
    empty = [d.run for d in datas if d.run.study == claim.study]
    if not empty:
        return f"no {claim.study} run given; run `{claim.run}`"
    said = []
    for r in empty:
        said.append(f"run {r.id} has no {claim.workload} results ({r.status}, 0 of {r.n_cases} cases stored)")
    return f"{'; '.join(said)}; run `{claim.run}`"


def per_run(name: str) -> Callable[[RunRule], RunRule]:
    """Register a rule judged on one run at a time: the first run (in the order given) that decides it."""
    def register(fn: RunRule) -> RunRule:
        def judge(claim: Claim, datas: list[ReportData]) -> Outcome:
            assert claim.workload is not None
            runs = runs_with(datas, claim.workload)
            if not runs:
                return Outcome(CANNOT_CHECK, None, not_run(claim, datas))
            reasons: list[str] = []
            for data in runs:
                trail = Trail()
                try:
                    verdict, measured, detail = fn(claim, data, trail)
                except CannotCheck as exc:
                    note = trail.note()
                    reasons.append(str(exc) + (f" ({note})" if note else ""))
                    continue
                note = trail.note()
                return Outcome(verdict, measured, detail + (f"; {note}" if note else ""), tuple(trail.run_ids))
            unique = list(dict.fromkeys(reasons))
            return Outcome(CANNOT_CHECK, None, "; ".join(unique), ())
        RULES[name] = judge
        return fn
    return register


def judge_band(claim: Claim, measured: float, value: float, factor: float, what: str = "") -> tuple[str, str]:
    """(verdict, detail) for a ratio the paper gives as `value`: holds within `factor` of it and on the
    same side of 1 (which of the two is faster is the claim's core)."""
    lo, hi = value / factor, value * factor
    same_side = (measured > 1) == (value > 1)
    rel = measured / value
    if abs(rel - 1) <= 0.005:
        how = f"equal to the paper's {value:g}x (within 0.5%)"
    elif 1 / 1.1 < rel < 1.1:  # '1x above' says nothing: a percentage does
        how = f"{abs(rel - 1) * 100:.2g}% {'below' if rel < 1 else 'above'} the paper's {value:g}x"
    else:
        how = (f"{1 / rel:.2g}x below the paper's {value:g}x" if rel < 1
               else f"{rel:.2g}x above the paper's {value:g}x")
    head = f"measured {fmt_x(measured)}{what}, {how}"
    if lo <= measured <= hi and same_side:
        return HOLDS, f"{head}; tolerance: {claim.tolerance}"
    side = "" if same_side else ("; the other side of 1: the order of the two is reversed")
    return DOES_NOT_HOLD, f"{head}{side}; tolerance: {claim.tolerance}"
