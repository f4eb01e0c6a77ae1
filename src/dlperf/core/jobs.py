"""Worker jobs: what the runner asks a fresh worker process to do, one model per kind of work.

The runner writes a job as JSON (`model_dump_json`) and the worker reads it back with `read_job`; the
`mode` field tells the kinds apart. `parent_pid` and `result_path` are filled in by
`runner.process.run_worker` just before the worker starts.
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from dlperf.core.settings import RunSettings

#: The environment variable in which `runner.process.run_worker` hands a worker the time (`time.time()`) it was
#: started, from which its time-out counts: what a driven case plans against (`serving.plan.Budget`).
WORKER_STARTED_AT_ENV = "DLPERF_WORKER_STARTED_AT"


def worker_age_s() -> float | None:
    """Seconds since the runner started this case worker, against whose time-out a case that plans its own time
    (a LoadGen run, a torchrun job) must finish; None outside a case worker (a test or a notebook calling the step
    in-process, whose own age says nothing about any time-out)."""
    try:
        started = float(os.environ[WORKER_STARTED_AT_ENV])
    except (KeyError, ValueError):
        return None
    return max(0.0, time.time() - started)


class CaseSpec(BaseModel):
    """One case as a worker builds it: which workload, on which framework and device, with which params."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: str
    framework: str
    device: str
    params: dict[str, Any] = Field(default_factory=dict)


class _Job(BaseModel):
    """Fields every job carries to its worker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parent_pid: int | None = Field(default=None, description="the runner's pid: the worker dies with it")
    result_path: str | None = Field(default=None, description="where the worker writes its result JSON")

    @property
    def mem_limit_mb(self) -> int | None:
        """The worker's memory cap in MiB (None: none)."""
        return None


class _SettingsJob(_Job):
    """A job on one case, under the run's settings."""

    case: CaseSpec
    settings: RunSettings = Field(default_factory=RunSettings)

    @property
    def mem_limit_mb(self) -> int | None:
        return self.settings.mem_limit_mb


class CaseJob(_SettingsJob):
    """Build the case, time it, derive its metrics (the result a store row is made of)."""

    mode: Literal["case"] = "case"


class OneStepJob(_SettingsJob):
    """Build the case and run one step, untimed: does it run at all under this memory cap?"""

    mode: Literal["one-step"] = "one-step"


class CountersJob(_SettingsJob):
    """Run the case's step `calls` times inside the NVTX range Nsight Compute profiles; nothing timed."""

    mode: Literal["counters"] = "counters"
    calls: int = Field(gt=0)


class FingerprintJob(_Job):
    """Fingerprint the environment with these frameworks' versions (imported in the worker only)."""

    mode: Literal["fingerprint"] = "fingerprint"
    frameworks: list[str]
    threads: int | None = None


class CeilingsJob(_Job):
    """Measure the run's ceilings: bandwidth per memory level and GEMM FLOP/s on each device
    (`runner.ceilings`), with the run's frameworks and thread count."""

    mode: Literal["ceilings"] = "ceilings"
    frameworks: list[str]
    devices: list[str]
    threads: int | None = None
    quick: bool = False


class ProbeJob(_Job):
    """Version and devices of every registered framework (`dlperf doctor`)."""

    mode: Literal["probe"] = "probe"


Job = Annotated[CaseJob | OneStepJob | CountersJob | FingerprintJob | CeilingsJob | ProbeJob,
                Field(discriminator="mode")]
#: Every job type, for code that must handle each (the worker's dispatch table).
JOB_TYPES: tuple[type[_Job], ...] = (CaseJob, OneStepJob, CountersJob, FingerprintJob, CeilingsJob, ProbeJob)

JOB_ADAPTER: TypeAdapter[Job] = TypeAdapter(Job)


def read_job(text: str | bytes) -> Job:
    """A job from its JSON (as `model_dump_json` wrote it)."""
    return JOB_ADAPTER.validate_json(text)


def as_job(job: Job | dict[str, Any]) -> Job:
    """`job` itself, or the Job a plain dict describes (validated; its `mode` picks the type)."""
    return job if isinstance(job, _Job) else JOB_ADAPTER.validate_python(job)
