"""`ops`: single operations (study 002's six plus relu, softmax, conv2d) at a given working-set size.

Inputs are made once from a seeded generator, identical for every framework,
and put on the device before timing; each step keeps its output. Each builder
reports the bytes of the arrays it built (`Step.array_nbytes`): the stored bytes
per call are theirs, and a case whose arrays are not the size the cost model
gives for its dtype (a silent cast) ends in an error, not in a wrong GB/s. The shape and
cost conventions are in `dlperf.workloads.ops.spec`; the builders are the
`<family>_ops` modules beside this one (CuPy's reuses NumPy's).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams
from dlperf.workloads.ops import spec

Op = Literal["add", "mul", "scalar", "sigmoid", "tanh", "dot", "relu", "softmax", "conv2d"]


class OpsParams(WorkloadParams):
    op: Op
    size_mb: float = Field(gt=0, le=65536, description="working set: all arrays the op touches, MiB")
    dtype: Literal["float32", "float64", "float16", "bfloat16"] = "float32"

    @field_validator("op", mode="before")
    @classmethod
    def _matmul_is_dot(cls, v: Any) -> Any:
        return "dot" if v == "matmul" else v  # study 002 calls the matrix product "dot"

    def shape(self) -> dict[str, int]:
        """The array dimensions that give `size_mb` MiB of working set."""
        return spec.shape_for(self.op, self.size_mb, self.dtype)

    def inputs(self) -> dict[str, np.ndarray]:
        """The seeded float32 NumPy inputs, the same for every framework (each builder casts to its dtype)."""
        return spec.make_inputs(self.op, self.shape())


class Ops(Workload[OpsParams]):
    name = "ops"
    description = "single ops (add, mul, scalar, sigmoid, tanh, dot, relu, softmax, conv2d) at a working-set size"
    Params = OpsParams

    def cost(self, params: OpsParams) -> Cost:
        return spec.cost(params.op, params.shape(), params.dtype)

    def built_cost(self, params: OpsParams, step: Step) -> Cost:
        """The model's FLOPs, and the bytes of the arrays the builder made (inputs and output, each once)."""
        model = self.cost(params)
        if step.array_nbytes is None:
            return model
        arrays = step.array_nbytes()
        built = float(sum(arrays.values()))
        if built != model.bytes_moved:
            sizes = ", ".join(f"{k} {v} B" for k, v in arrays.items())
            raise RuntimeError(f"the built arrays hold {built:.0f} bytes ({sizes}), the {params.dtype} cost model "
                               f"counts {model.bytes_moved:.0f}: the builder did not keep {params.dtype}")
        return Cost(flops=model.flops, bytes_moved=built, samples=model.samples)

    def shape(self, params: OpsParams) -> dict[str, int]:
        return params.shape()
