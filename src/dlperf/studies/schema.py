"""The study file schema (pydantic): what a YAML study may say, and nothing else."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from dlperf.frameworks import REGISTRY as FRAMEWORKS
from dlperf.workloads import REGISTRY as WORKLOADS

#: A parameter grid: each key maps to the list of values it takes (a scalar means one value).
ParamGrid = dict[str, Any]


def _known_framework(name: str) -> str:
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework {name!r} (known: {', '.join(sorted(FRAMEWORKS))})")
    return name


#: The longest study name: a run's id is the name and 21 characters more, in the store's 128-character column.
STUDY_NAME_MAX = 100


def is_device_name(d: str) -> bool:
    """A device dlperf runs on: cpu, cuda or cuda:N (a study's `devices`, or `--device`)."""
    return re.fullmatch(r"cpu|cuda(:\d{1,4})?", d) is not None  # the index's digits capped: results.device is 32 wide


def _device_name(d: str) -> str:
    if not is_device_name(d):
        raise ValueError(f"unknown device {d!r} (expected cpu, cuda or cuda:N)")
    return d


FrameworkName = Annotated[str, AfterValidator(_known_framework)]
DeviceName = Annotated[str, AfterValidator(_device_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Settings(_Strict):
    """Keys a study sets and its `quick` variant may override (None = inherit; the defaults are
    `dlperf.core.settings.RunSettings`'s)."""

    frameworks: list[FrameworkName] | None = Field(default=None, min_length=1)
    devices: list[DeviceName] | None = Field(default=None, min_length=1)
    params: ParamGrid | list[ParamGrid] | None = None
    repetitions: int | None = Field(default=None, gt=0, description="independent worker runs per case")
    budget_s: float | None = Field(default=None, allow_inf_nan=False, gt=0,
                                   description="timer budget per case, seconds")
    min_run_time_s: float | None = Field(default=None, allow_inf_nan=False, ge=0)
    timeout_s: float | None = Field(default=None, allow_inf_nan=False, gt=0,
                                    description="worker time-out per case, seconds")
    mem_limit_mb: int | None = Field(default=None, gt=0, description="memory cap of each worker")
    threads: int | None = Field(default=None, gt=0, description="CPU threads (default: physical cores)")
    warmup: int | None = Field(default=None, ge=0)
    steps: int | None = Field(
        default=None, gt=0, description="a fixed number of timed calls, one per sample, instead of the adaptive stop")
    target_rel_ci: float | None = Field(default=None, allow_inf_nan=False, gt=0, lt=1)
    per_call: bool | None = Field(
        default=None, description="time every call alone for p50/p90/p99 (default false; generation always is)")
    seed: int | None = None
    exclude: list[dict[str, Any]] | None = Field(
        default=None, description="cases to leave out: each entry matches on framework, device and/or params")
    energy: bool | None = Field(default=None, description="measure energy where a meter exists (default true)")
    profile: bool | None = Field(default=None, description="store a cProfile profile of each case (default false)")


class StudyFile(Settings):
    """A whole study file: the workload, its defaults, and an optional quick variant."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=STUDY_NAME_MAX)
    description: str = ""
    workload: str
    quick: Settings | None = None

    @field_validator("workload")
    @classmethod
    def _known_workload(cls, v: str) -> str:
        if v not in WORKLOADS:
            raise ValueError(f"unknown workload {v!r} (known: {', '.join(sorted(WORKLOADS))})")
        return v

