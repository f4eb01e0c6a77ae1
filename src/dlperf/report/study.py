"""What a study report is given: the run, its environment, its typed results, and where plots go.

Reports never query the store: whoever renders (the CLI) reads everything a report needs first,
including the `peaks` runs of the same host that the roofline's measured ceilings come from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.store.rows import RunRow


@dataclass(frozen=True)
class ReportData:
    run: RunRow
    env: Environment
    results: list[CaseResult]
    #: Where plots are written.
    plot_dir: Path
    #: Measured peaks of this host: ({device: {gemm|copy|triad: rate}}, ids of the runs they came from).
    measured_peaks: tuple[dict[str, dict[str, float]], str | None] = field(default_factory=lambda: ({}, None))

    def of(self, workload: str) -> list[CaseResult]:
        """This run's results of one workload."""
        return [r for r in self.results if r.workload == workload]
