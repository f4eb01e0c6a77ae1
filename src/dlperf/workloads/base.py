"""The workload interface: a parameter schema, a cost model, and one builder per framework.

A builder `build_<framework>(fw, device, params)` creates its inputs on the
device (outside timing) and returns the zero-argument step that the timer calls.
The step keeps its output alive so no compiler can drop the work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from dlperf.frameworks import Framework


class WorkloadParams(BaseModel):
    """Base for parameter schemas: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Cost:
    """What one call of the step does, by the workload's documented counting convention.

    None means the workload does not model that quantity (never a guess).
    """

    flops: float | None = None
    bytes_moved: float | None = None
    samples: int = 1


@dataclass(frozen=True)
class Step:
    """A built workload: `fn` is what the timer calls; `result()` returns its last
    output as a float64 NumPy array (for correctness checks, never timed)."""

    fn: Callable[[], object]
    result: Callable[[], Any] | None = None
    #: What a cProfile profile should run (e.g. `fit` for a few batches); default: `fn` once.
    profile: Callable[[], Any] | None = None


class Workload:
    """Base workload. Subclasses set `name`, `Params`, and define `cost` and builders."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type[WorkloadParams]] = WorkloadParams

    def builders(self) -> dict[str, Callable[..., Any]]:
        """Framework name -> builder(fw, device, params). Default: the `build_<name>` methods."""
        return {a[len("build_"):]: getattr(self, a) for a in dir(self) if a.startswith("build_")}

    def frameworks(self) -> list[str]:
        """Frameworks this workload has a builder for."""
        return sorted(self.builders())

    def parse(self, raw: dict[str, Any]) -> WorkloadParams:
        return self.Params.model_validate(raw)

    def cost(self, params: WorkloadParams) -> Cost:
        raise NotImplementedError(f"{type(self).__name__} does not define a cost model")

    def build(self, fw: Framework, device: str, params: WorkloadParams) -> Step:
        builder = self.builders().get(fw.name)
        if builder is None:
            from dlperf.frameworks import UnsupportedError

            raise UnsupportedError(
                f"workload {self.name!r} has no {fw.name} implementation "
                f"(it has: {', '.join(self.frameworks())})"
            )
        built = builder(fw, device, params)
        return built if isinstance(built, Step) else Step(built)
