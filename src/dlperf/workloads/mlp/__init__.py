"""`mlp`: the two-layer nets of study 000, one training iteration per timed call.

The builders are the `<family>_mlp` modules beside this one.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from dlperf.frameworks import Framework
from dlperf.workloads import xla_compile
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams
from dlperf.workloads.mlp import spec


class MlpParams(WorkloadParams):
    variant: Literal["tensors", "autograd", "custom_function"]
    size: Literal["small", "medium", "large", "custom"] = "small"
    n: int | None = Field(default=None, gt=0)
    d_in: int | None = Field(default=None, gt=0)
    h: int | None = Field(default=None, gt=0)
    d_out: int | None = Field(default=None, gt=0)
    iterations: int = Field(default=500, gt=0, description="iterations of one run (time per run = x median)")
    lr: float = Field(default=1e-6, gt=0)
    dtype: Literal["float32", "float64"] = "float32"

    @model_validator(mode="after")
    def _dims(self) -> MlpParams:
        given = [v is not None for v in (self.n, self.d_in, self.h, self.d_out)]
        if self.size == "custom" and not all(given):
            raise ValueError("size 'custom' needs n, d_in, h and d_out")
        if self.size != "custom" and any(given):
            raise ValueError(f"size {self.size!r} fixes n, d_in, h, d_out (study 000, Table 1): use size 'custom'")
        return self

    def dims(self) -> spec.Dims:
        if self.size == "custom":
            return spec.Dims(self.n, self.d_in, self.h, self.d_out)  # type: ignore[arg-type]
        return spec.Dims(*spec.SIZES[self.size])

    def initial_state(self) -> dict[str, np.ndarray]:
        """The seeded data and weights every framework's builder starts from."""
        return spec.initial_state(self.dims())


class Mlp(Workload[MlpParams]):
    name = "mlp"
    description = "study 000's two-layer net: forward, squared error, backward, SGD; one iteration per call"
    Params = MlpParams

    def cost(self, params: MlpParams) -> Cost:
        return spec.cost(params.dims(), 8 if params.dtype == "float64" else 4)

    def build(self, fw: Framework, device: str, params: MlpParams) -> Step:
        """The builder's step; an XLA mode's with its compiler cache (`xla_compile`: cold and warm compile)."""
        return xla_compile.build(self, fw, device, params)

    def extra_metrics(self, params: MlpParams, step: Step) -> dict[str, Any]:
        """An XLA mode's cold and warm compile (`xla_compile.record`)."""
        return dict(xla_compile.record(step))
