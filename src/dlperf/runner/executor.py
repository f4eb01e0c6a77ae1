"""Where a sweep's cases run when not one by one in this process: the interface an executor meets.

`runner.sweep.run_study(..., executor=X)` keeps the whole run lifecycle (filters, resume checks, the run's
lease) and hands X the cases the run lacks; X runs them elsewhere (`dlperf.fleet`: Dask workers on other
machines), each stored there with the run's lease token, and yields each stored row for the progress lines.
The runner never imports an executor: the CLI passes one in (no package circle).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from dlperf.core.result import CaseResult
from dlperf.core.settings import RunSettings
from dlperf.runner.events import RunEvents
from dlperf.runner.lifecycle import OpenRun
from dlperf.studies import Case


@dataclass
class CaseBatch:
    """The cases a run still lacks, and what running them elsewhere needs."""

    todo: list[Case]  # in the order they should start (repetitions interleaved)
    settings: RunSettings
    run: OpenRun  # its run_id and lease_token: every row is stored under that lease
    frameworks: list[str]  # every framework of the run (a machine's fingerprint covers them all)
    counters: bool = False
    wait_idle_s: float | None = None
    events: RunEvents = field(default_factory=RunEvents)
    #: One line per reason some cases were not run (no machine for their device...): the run then ends
    #: `interrupted` and those cases stay re-runnable.
    not_run: list[str] = field(default_factory=list)


class CaseExecutor(Protocol):
    """Runs a batch's cases elsewhere; stores each itself (under the run's lease) and yields its row."""

    #: Stored in the run's filters as "executor": a run of one executor never resumes another's.
    name: str

    def run_cases(self, batch: CaseBatch) -> Iterator[CaseResult]:
        """Run every case of `batch.todo` (or say in `batch.not_run` why some were not), yielding each
        stored row as it lands; LeaseLostError where the run was taken over."""
        ...
