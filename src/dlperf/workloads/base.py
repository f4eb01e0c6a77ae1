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


class Workload:
    """Base workload. Subclasses set `name`, `Params`, and define `cost` and builders."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type[WorkloadParams]] = WorkloadParams

    def frameworks(self) -> list[str]:
        """Frameworks this workload has a builder for."""
        return sorted(a[len("build_"):] for a in dir(self) if a.startswith("build_"))

    def parse(self, raw: dict[str, Any]) -> WorkloadParams:
        return self.Params.model_validate(raw)

    def cost(self, params: WorkloadParams) -> Cost:
        raise NotImplementedError(f"{type(self).__name__} does not define a cost model")

    def build(self, fw: Framework, device: str, params: WorkloadParams) -> Callable[[], object]:
        builder = getattr(self, f"build_{fw.name}", None)
        if builder is None:
            from dlperf.frameworks import UnsupportedError

            raise UnsupportedError(
                f"workload {self.name!r} has no {fw.name} implementation "
                f"(it has: {', '.join(self.frameworks())})"
            )
        return builder(fw, device, params)
