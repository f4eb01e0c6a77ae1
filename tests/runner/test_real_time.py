"""A reported time is real time: a case whose every call sleeps 10 ms (the faults workload's `nap`) runs through
the whole path a study's case takes (a worker process, the timer, the stored metrics) and must report 10-13 ms.

The lower bound holds on any machine (a sleep never ends early); the upper allows a busy machine's wake-up
latency. The timed calls are also checked against the wall clock this test reads around the run: they cannot
take longer than it, nor less than the sleeps they hold."""

from __future__ import annotations

import time

from dlperf.core.settings import RunSettings
from dlperf.runner.sweep import run_case
from dlperf.studies.loader import Case
from dlperf.timing import Measurement

SLEEP_S = 0.010
CASE = Case("faults", "numpy", "cpu", {"mode": "nap", "sleep_s": SLEEP_S})
SETTINGS = RunSettings(threads=1, budget_s=0.5, min_run_time_s=0.2, timeout_s=60, energy=False)


def test_a_10_ms_sleep_is_reported_as_10_to_13_ms() -> None:
    start = time.perf_counter()
    row = run_case(CASE, SETTINGS, "test-run", env_id=1)
    wall_s = time.perf_counter() - start
    assert row.ok, row.reason
    m = Measurement.from_dict(row.measurement)
    assert row.m.median_s == m.median_s  # what show, report and export print is the samples' median
    assert SLEEP_S <= m.median_s <= 1.3 * SLEEP_S, m.median_s
    # every timed call slept at least SLEEP_S, and all of them ran inside the worker, inside this test's wall time
    assert m.total_iters * SLEEP_S <= m.total_time_s <= row.wall_s <= wall_s, (m.total_iters, m.total_time_s,
                                                                               row.wall_s, wall_s)
    assert m.total_iters >= 10  # enough calls for the median to be one (0.2 s at least of 10 ms calls)
