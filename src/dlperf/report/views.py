"""What each workload shows above the runner, in one object per workload (`WorkloadView`): its study report's
sections, its progress line for a finished case, and whether a validity line follows its report.

`cli/progress` and `report/registry` find a workload's view by its name (`VIEWS`); adding a workload's report
is its module and one line here. A workload without a view gets the default progress line (median, IQR, n) and no
study report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlperf.core.result import CaseResult
from dlperf.report import (
    backends_report,
    cnn_report,
    collectives_report,
    compiler_report,
    ddp_report,
    mlp_report,
    model_report,
    ops_report,
    peaks_table,
    serving_report,
    transformer_report,
)
from dlperf.report.sections import Section
from dlperf.report.serving_text import verdict_text
from dlperf.report.study import ReportData
from dlperf.units import format_iqr, format_time


def timer_line(result: CaseResult, state: dict[Any, Any]) -> str:
    """The default progress detail of an ok case: the timer's median, IQR and sample count."""
    m = result.m
    return f"median {format_time(m.median_s)} (IQR {format_iqr(m.iqr_rel)}, n={m.n_samples})"


def _ddp_line(result: CaseResult, state: dict[Any, Any]) -> str:
    """A torchrun job's world size and global samples/s, with its scaling efficiency once the series' world size 1
    case has run (`state` keeps those rates for the sweep)."""
    key = ddp_report.series_key(result)
    if ddp_report.world_size(result) == 1 and result.m.samples_per_s:
        state[key] = result.m.samples_per_s
    return ddp_report.progress_detail(result, state.get(key))


@dataclass(frozen=True)
class WorkloadView:
    """A workload as reports and the progress lines show it."""

    #: The study report: the run's cases of this workload as sections.
    sections: Callable[[ReportData], list[Section]]
    #: The progress line's detail for an ok case; `state` lives as long as the sweep (ddp's base rates).
    progress: Callable[[CaseResult, dict[Any, Any]], str] = field(default=timer_line)
    #: The progress line adds the case's validity words (a LoadGen case carries its own verdict instead).
    says_validity: bool = True
    #: A line after the report names the cases that were not valid (ops marks them in its own tables).
    validity_note: bool = True


VIEWS: dict[str, WorkloadView] = {
    "ops": WorkloadView(ops_report.sections, validity_note=False),
    "mlp": WorkloadView(mlp_report.sections),
    "backends": WorkloadView(backends_report.sections),
    "cnn": WorkloadView(cnn_report.sections),
    "peaks": WorkloadView(peaks_table.sections),
    "transformer": WorkloadView(transformer_report.sections),
    "serve": WorkloadView(serving_report.sections, progress=lambda r, _state: verdict_text(r.m), says_validity=False),
    "ddp": WorkloadView(ddp_report.sections, progress=_ddp_line),
    "collectives": WorkloadView(collectives_report.sections,
                                progress=lambda r, _state: collectives_report.progress_detail(r)),
    "model": WorkloadView(lambda data: model_report.sections(data) + compiler_report.sections(data)),
}
#: A workload with no view of its own: no study report, the default progress line.
DEFAULT = WorkloadView(lambda data: [])


def view(workload: str) -> WorkloadView:
    return VIEWS.get(workload, DEFAULT)


__all__ = ["DEFAULT", "VIEWS", "WorkloadView", "timer_line", "view"]
