"""What a worker process hands back: the result JSON it writes (`runner.worker.write_result`), or the one
`runner.process` makes for a worker that left none, typed by its keys.

Every job's result has `status` (a case's `CaseStatus`; "ok" or "error" for the other jobs) and, where it did
not end "ok", `reason`. The other keys depend on the job (`core.jobs`): a case's `measurement` and `metrics`, a
one-step check's `peak_rss_bytes`, the fingerprint, the ceilings, the frameworks' probe. `metrics` stays an open
dict: a workload and a tool add keys of their own to it (`core.result.Metrics` keeps them as extra fields).
"""

from __future__ import annotations

from typing import Any, Required, TypedDict

from dlperf.core.status import CaseStatus
from dlperf.runner.ceilings_record import Ceilings
from dlperf.timing.measurement import MeasurementRecord


class FrameworkProbe(TypedDict, total=False):
    """One framework as the worker's probe found it (`dlperf doctor`): installed or not, with the hint to install
    it, else its version and devices, or the one-line error that listing them raised."""

    installed: Required[bool]
    hint: str
    version: str | None
    devices: list[str]
    error: str


class WorkerResult(TypedDict, total=False):
    """A worker's result (see the module): the keys each job writes, all but `status` absent where unused."""

    status: Required[CaseStatus]
    reason: str | None
    #: a timed case's raw samples (`timing.Measurement.to_dict`); None for a case that measures itself untimed
    measurement: MeasurementRecord | None
    #: a case's metrics, open-ended (see the module); None where a case ended before it measured anything
    metrics: dict[str, Any] | None
    #: a failure under a memory cap that memory may have caused: the parent re-checks it (`runner.recheck`)
    oom_suspect: bool
    #: a one-step check's own peak RSS (`runner.worker.run_one_step`)
    peak_rss_bytes: int
    #: the environment's fingerprint (`hardware.identity.fingerprint`)
    fingerprint: dict[str, Any]
    #: the run's ceilings (`runner.ceilings.measure_in_worker`)
    ceilings: Ceilings
    #: every registered framework by name (`runner.worker.probe_frameworks`)
    frameworks: dict[str, FrameworkProbe]
    #: the text of each file a profiler wrapping the worker wrote in its folder, by file name (`process.run_worker`)
    _tmpdir_files: dict[str, str]
