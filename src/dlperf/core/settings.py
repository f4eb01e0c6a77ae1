"""`RunSettings`: the resolved settings a case runs with, and the one place their defaults live.

A study file (`studies.schema.Settings`, every key None = inherit) is resolved file -> quick variant ->
these defaults by the loader; the command line's overrides are applied with `with_overrides`. What is
stored as `runs.settings` (and hashed into a study's identity) is `stored()`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dlperf.timing import defaults

#: A parameter grid: each key maps to the list of values it takes (a scalar means one value).
ParamGrid = dict[str, Any]

#: Keys stored only where set: they came after runs.settings was first written, and a run that never
#: set them keeps its stored settings (and its study's hash) as they were.
_STORED_ONLY_WHEN_SET = frozenset({"energy_estimate_tdp_w", "per_call", "precision_rel", "max_processes",
                                   "precision_budget_s"})


class RunSettings(BaseModel):
    """The settings of a run, every key resolved. Field order is the stored JSON's key order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    devices: list[str] = Field(default_factory=lambda: ["cpu"], min_length=1)
    params: ParamGrid | list[ParamGrid] = Field(default_factory=dict)
    repetitions: int = Field(default=1, gt=0, description="independent worker runs per case")
    budget_s: float = Field(default=defaults.BUDGET_S, gt=0, description="timer budget per case, seconds")
    min_run_time_s: float = Field(default=defaults.MIN_RUN_TIME_S, ge=0)
    timeout_s: float = Field(default=600.0, gt=0, description="worker time-out per case, seconds")
    mem_limit_mb: int | None = Field(default=None, gt=0, description="memory cap of each worker (None: none)")
    threads: int | None = Field(
        default=None, gt=0, description="CPU threads; None until the runner resolves it (`with_threads`)")
    warmup: int = Field(default=defaults.WARMUP, ge=0)
    steps: int | None = Field(
        default=None, gt=0, description="a fixed number of timed calls, one per sample, instead of the adaptive stop")
    target_rel_ci: float = Field(default=defaults.TARGET_REL_CI, gt=0, lt=1)
    seed: int = 0
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    energy: bool = Field(default=True, description="measure energy where a meter exists")
    profile: bool = Field(default=False, description="store a cProfile (and kernel) profile of each case")
    frameworks: list[str] = Field(default_factory=list)
    energy_estimate_tdp_w: float | None = Field(
        default=None, gt=0, description="the CPU's TDP for `--energy-estimate tdp` (None: no estimate)")
    per_call: bool = Field(
        default=False, description="time every call alone (block 1, >= 100 samples) for tail percentiles; a "
        "workload may ask for it itself (`Workload.per_call_timing`)")
    precision_rel: float | None = Field(
        default=None, gt=0, lt=1, description="`--precision`: more processes per case while the 95% interval of "
        "its process medians is wider than this, relative (None: only the planned repetitions)")
    max_processes: int | None = Field(
        default=None, gt=2, description="the most processes per case `precision_rel` may run (None: the default); "
        "3 at least, the fewest over which a target counts as reached (`runner.precision.MIN_MEDIANS`)")
    precision_budget_s: float | None = Field(
        default=None, gt=0, description="extra seconds the run may spend on added processes (None: as long as "
        "its planned processes took)")

    def with_overrides(self, **overrides: Any) -> RunSettings:
        """A copy with these keys replaced (validated); a None value leaves its key as it is."""
        given = {k: v for k, v in overrides.items() if v is not None}
        if not given:
            return self
        return type(self).model_validate(self.model_dump() | given)

    def with_threads(self, default_threads: int) -> RunSettings:
        """A copy with `threads` resolved: as set, else `default_threads` (the machine's physical cores)."""
        return self if self.threads is not None else self.with_overrides(threads=default_threads)

    def stored(self) -> dict[str, Any]:
        """The JSON form stored as `runs.settings` and hashed into a study's identity."""
        out = self.model_dump(mode="json")
        for key in _STORED_ONLY_WHEN_SET:
            if out[key] in (None, False):
                del out[key]
        return out
