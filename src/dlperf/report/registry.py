"""The study reports, by workload: each turns a run's `ReportData` into sections (`report.sections`).

Adding a report is one module with a `sections(data) -> list[Section]` function and one line here.
`run` and `report` draw the same sections, after the run table, in this order.
"""

from __future__ import annotations

from collections.abc import Callable

from dlperf.report import backends_report, cnn_report, mlp_report, ops_report, peaks_table
from dlperf.report.sections import Section
from dlperf.report.study import ReportData

REPORTS: dict[str, Callable[[ReportData], list[Section]]] = {
    "ops": ops_report.sections,
    "mlp": mlp_report.sections,
    "backends": backends_report.sections,
    "cnn": cnn_report.sections,
    "peaks": peaks_table.sections,
}


def study_sections(data: ReportData) -> list[Section]:
    """The sections of every study report whose workload the run has (plots written to data.plot_dir)."""
    present = {r.workload for r in data.results}
    return [s for workload, build in REPORTS.items() if workload in present for s in build(data)]
