"""`ops`: single operations (study 002's six plus relu, softmax, conv2d) at a given working-set size.

Inputs are made once from a seeded generator, identical for every framework,
and put on the device before timing; each step keeps its output. The shape and
cost conventions are in `dlperf.workloads.ops.spec`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator

from dlperf.frameworks import Framework
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


class Ops(Workload):
    name = "ops"
    description = "single ops (add, mul, scalar, sigmoid, tanh, dot, relu, softmax, conv2d) at a working-set size"
    Params = OpsParams

    def cost(self, params: OpsParams) -> Cost:  # type: ignore[override]
        return spec.cost(params.op, spec.shape_for(params.op, params.size_mb, params.dtype), params.dtype)

    def builders(self) -> dict[str, Callable[..., Any]]:
        from dlperf.workloads.ops import jax_ops, nn_ops, numpy_ops, pytensor_ops, tensorflow_ops, torch_ops

        modules = {"numpy": numpy_ops, "cupy": numpy_ops, "torch": torch_ops, "tensorflow": tensorflow_ops,
                   "tensorflow-eager": tensorflow_ops, "jax": jax_ops, "pytensor": pytensor_ops,
                   "theano": pytensor_ops, "nn-sequential": nn_ops, "nn-vectorized": nn_ops, "nn-cuda": nn_ops,
                   "nn-cuda-cublas": nn_ops}
        return {name: self._builder(mod) for name, mod in modules.items()}

    @staticmethod
    def _builder(module: Any) -> Callable[[Framework, str, OpsParams], Step]:
        def build(fw: Framework, device: str, p: OpsParams) -> Step:
            shape = spec.shape_for(p.op, p.size_mb, p.dtype)
            return module.build(fw, device, p.op, p.dtype, spec.make_inputs(p.op, shape))

        return build

    def shape(self, params: OpsParams) -> dict[str, int]:
        return spec.shape_for(params.op, params.size_mb, params.dtype)
