"""`faults`: a diagnostic workload that misbehaves on purpose, to check the runner.

Each mode exercises one way a real case can end: `ok` (a trivial timed call),
`raise` (an exception), `sleep` (outlives its time-out), `signal` (the worker
kills itself with a signal), `alloc` (allocates until memory runs out), `exit`
(the worker exits without reporting), `suspect` (needs `need_mb` at once and, when
that fails, raises the words oneDNN uses for any failed primitive, or with
`fail_as: signal` dies of SIGSEGV as unchecked native code does, so that the
runner must find out whether memory was the cause), `nap` (each timed call sleeps `sleep_s`: a call whose
length is known, which ties a reported time to real time). `dlperf run` of a study using it shows
how dlperf records each status; the test suite uses it for the same purpose.
The builder is `numpy_faults` beside this module (NumPy only).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dlperf.workloads.base import Cost, Workload, WorkloadParams


class FaultsParams(WorkloadParams):
    mode: Literal["ok", "raise", "sleep", "signal", "alloc", "exit", "suspect", "nap"]
    sleep_s: float = Field(default=3600.0, gt=0)
    chunk_mb: int = Field(default=64, gt=0)
    need_mb: int = Field(default=1536, gt=0)
    fail_as: Literal["error", "signal"] = "error"


class Faults(Workload[FaultsParams]):
    name = "faults"
    description = "diagnostic: a case that succeeds, raises, hangs, is killed, runs out of memory, or naps per call"
    Params = FaultsParams

    def cost(self, params: FaultsParams) -> Cost:
        return Cost(flops=None, bytes_moved=None, samples=1)
