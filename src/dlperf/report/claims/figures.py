"""Picking the cases a claim is judged on, and saying exactly why none can be picked.

Only ok cases count. A case whose validity is `invalid` never decides a verdict (it is left out and the
detail says so); `noisy` and `contended` cases may decide, and the detail says they did. A figure that
cannot be formed raises `CannotCheck` with what is missing, which becomes a `cannot check here` verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlperf.core.result import CaseResult
from dlperf.report.study import ReportData


class CannotCheck(Exception):
    """What the runs lack for a claim (a GPU, a framework, a meter, a run), as one sentence."""


def on_device(r: CaseResult, device: str) -> bool:
    """`cuda` matches cuda and cuda:N; any other name matches itself."""
    return r.device == device or (device == "cuda" and r.device.startswith("cuda:"))


def short_key(r: CaseResult) -> str:
    """The case key without its workload, for a detail line."""
    return r.case_key.split("/", 1)[-1]


def clip(text: str | None, n: int = 160) -> str:
    text = " ".join((text or "no reason stored").split())
    return text if len(text) <= n else text[: n - 3] + "..."


@dataclass
class Trail:
    """What a verdict's figures rest on: the runs used, the invalid cases left out, the noisy/contended ones kept."""

    run_ids: list[str] = field(default_factory=list)
    left_out: list[CaseResult] = field(default_factory=list)
    flagged: list[CaseResult] = field(default_factory=list)

    def use(self, data: ReportData) -> None:
        if data.run.id not in self.run_ids:
            self.run_ids.append(data.run.id)

    def take(self, results: list[CaseResult]) -> list[CaseResult]:
        """The cases that may decide (ok, not invalid); the rest is remembered for the detail."""
        good = []
        for r in results:
            if r.m.validity == "invalid":
                if r not in self.left_out:
                    self.left_out.append(r)
                continue
            if r.m.validity in ("noisy", "contended") and r not in self.flagged:
                self.flagged.append(r)
            good.append(r)
        return good

    def note(self) -> str:
        """'' or a sentence on the invalid cases left out and the noisy/contended figures used."""
        parts = []
        if self.left_out:
            names = ", ".join(short_key(r) for r in self.left_out[:3]) + (", ..." if len(self.left_out) > 3 else "")
            parts.append(f"{len(self.left_out)} invalid case(s) left out ({names}: "
                         f"{clip(self.left_out[0].m.validity_reason, 100)})")
        if self.flagged:
            kinds = sorted({str(r.m.validity) for r in self.flagged})
            parts.append(f"{len(self.flagged)} of the figures used are {' or '.join(kinds)} "
                         f"(e.g. {short_key(self.flagged[0])}: {clip(self.flagged[0].m.validity_reason, 100)})")
        return "; ".join(parts)


def pick(data: ReportData, trail: Trail, what: str, *, workload: str, framework: str | None, device: str,
         match: Callable[[dict[str, Any]], bool] = lambda p: True) -> list[CaseResult]:
    """The usable cases of one framework (None: any) on one device whose params match; CannotCheck says why
    there are none."""
    wl = workload
    cases = [r for r in data.results if r.workload == wl and match(r.params)]
    mine = [r for r in cases if framework in (None, r.framework) and on_device(r, device)]
    ok = [r for r in mine if r.ok]
    good = trail.take(ok)
    if good:
        trail.use(data)
        return good
    run = data.run.id
    if ok:  # every ok case was invalid
        raise CannotCheck(f"the only {what} figures in run {run} are invalid measurements "
                          f"({clip(ok[0].m.validity_reason, 120)})")
    if mine:
        first = mine[0]
        if framework == "caffe" and first.status == "unsupported":
            raise CannotCheck(f"Caffe is not installed (the caffe adapter ended unsupported: {clip(first.reason)})")
        if device == "cuda" and first.status == "unsupported":
            raise CannotCheck(f"no CUDA GPU in these runs ({what} ended unsupported: {clip(first.reason)})")
        raise CannotCheck(f"{what} ended {first.status} in run {run} ({clip(first.reason)})")
    if device == "cuda" and not any(on_device(r, "cuda") for r in cases):
        raise CannotCheck(f"no CUDA GPU in these runs (run {run} has no cuda cases)")
    if framework is not None and not any(r.framework == framework for r in data.results if r.workload == wl):
        name = "Caffe" if framework == "caffe" else framework
        raise CannotCheck(f"{name} is not in run {run} (it ran {', '.join(sorted({r.framework for r in cases}))})")
    raise CannotCheck(f"run {run} has no {what} case")


def median_time(results: list[CaseResult]) -> float:
    """The figure the study reports print: the median over repetitions of each case's median time per call."""
    return statistics.median(r.m.median_s for r in results if r.m.median_s is not None)


def times(results: list[CaseResult]) -> float:
    """`median_time`, or CannotCheck where no case has a time."""
    known = [r for r in results if r.m.median_s is not None]
    if not known:
        raise CannotCheck(f"{short_key(results[0])} stored no time")
    return median_time(known)


def runs_with(datas: list[ReportData], workload: str) -> list[ReportData]:
    """The given runs that hold cases of this workload, in the order given."""
    return [d for d in datas if any(r.workload == workload for r in d.results)]


def fmt_x(value: float) -> str:
    """A ratio as the tables print it: 3 significant figures and an x."""
    return f"{value:.3g}x"
