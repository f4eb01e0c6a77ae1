"""The time a serve case may take, and each LoadGen run's planned wall time.

The worker is killed at the study's `timeout_s` (counted from its start), which loses every finished probe; at
MLPerf's durations (600 s a run) a Server search cannot fit in the default 600 s. So `drive` plans against a
deadline: a LoadGen run starts only when its planned wall time, max(min duration, min queries / rate) x
`RUN_MARGIN` + `RUN_OVERHEAD_S`, ends before it. A search stops there, keeping its probes; a scenario of one run
whose run cannot fit ends the case with an error that says to raise `timeout_s`.
"""

from __future__ import annotations

import math
import time
from typing import Any

from dlperf.core.jobs import worker_age_s
from dlperf.errors import ConfigError

#: Kept free after the last LoadGen run: the worker's activity window after it, its footprint, the result file.
DEADLINE_MARGIN_S = 15.0
#: A run's planned wall time over its min duration or queries: LoadGen's start, its drain, a loaded machine.
RUN_MARGIN = 1.3
#: ... plus this (s): LoadGen's set-up and its logs.
RUN_OVERHEAD_S = 2.0


class Budget:
    """What is left of the case's time before the worker's time-out (unlimited without one)."""

    def __init__(self, settings: Any) -> None:
        self.timeout_s: float | None = getattr(settings, "timeout_s", None)
        if not self.timeout_s:
            self.deadline = math.inf
            return
        age = worker_age_s()
        spent = 0.0 if age is None else age  # not a case worker: its time-out counts from now
        self.deadline = time.perf_counter() + self.timeout_s - spent - DEADLINE_MARGIN_S

    def left_s(self) -> float:
        return self.deadline - time.perf_counter()

    def fits(self, planned_s: float) -> bool:
        return planned_s <= self.left_s()

    def require(self, planned_s: float, what: str) -> None:
        """Raise ConfigError (the case ends with it) where the one run of a scenario cannot finish in time."""
        if not self.fits(planned_s):
            raise ConfigError(
                f"the {what} is planned to take about {planned_s:.0f} s but only {max(self.left_s(), 0):.0f} s of "
                f"the worker's {self.timeout_s:g} s time-out are left: raise the study's timeout_s (or shorten "
                f"min_duration_s / min_query_count)")


def planned_run_s(min_duration_s: float, queries: float, rate_per_s: float, drain_s: float = 0.0) -> float:
    """A LoadGen run's planned wall time (s): its min duration or its queries at `rate_per_s`, whichever is
    longer (or `drain_s`, the time the SUT needs for what was issued, where longer), with the margins."""
    core = max(min_duration_s, queries / rate_per_s if rate_per_s > 0 else math.inf, drain_s)
    return core * RUN_MARGIN + RUN_OVERHEAD_S


def describe(planned_s: float) -> str:
    return f"~{planned_s:.0f} s" if planned_s < math.inf else "unbounded"
