"""`ops`: single operations (study 002's six plus relu, softmax, conv2d) at a given working-set size, and
transformer ops (attention, layernorm, gelu, softmax over attention scores) at transformer shapes.

A sized op takes `size_mb`; attention, layernorm and gelu take their transformer dimensions instead
(`spec.SHAPE_FIELDS`), and softmax takes either (size_mb: rows of 1024; batch, heads, seq_len: the B H T
rows of T attention scores). Giving both, neither, or a dimension the op does not use is one error naming
what the op takes. attention alone takes `causal` and `backend` (torch's SDPA backends; other frameworks
run only the default). Defaults are stored as absent (causal false and backend default become None), so a
case has one identity whichever way it was written, and the sized ops' cases are those they always were.

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
from pydantic import Field, field_validator, model_validator

from dlperf.frameworks import UnsupportedError
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams
from dlperf.workloads.ops import spec

Op = Literal["add", "mul", "scalar", "sigmoid", "tanh", "dot", "relu", "softmax", "conv2d",
             "attention", "layernorm", "gelu"]
Backend = Literal["default", "math", "flash", "efficient", "cudnn"]
_DIM = {"gt": 0, "le": 1 << 20}
_ATTENTION_ONLY = ("causal", "backend")


class OpsParams(WorkloadParams):
    op: Op
    size_mb: float | None = Field(default=None, gt=0, le=65536,
                                  description="working set: all arrays the op touches, MiB (sized ops)")
    dtype: Literal["float32", "float64", "float16", "bfloat16"] = "float32"
    batch: int | None = Field(default=None, **_DIM, description="sequences (transformer ops)")
    heads: int | None = Field(default=None, **_DIM, description="attention heads (attention, softmax)")
    seq_len: int | None = Field(default=None, **_DIM, description="tokens per sequence (transformer ops)")
    head_dim: int | None = Field(default=None, **_DIM, description="width of one head (attention)")
    width: int | None = Field(default=None, **_DIM, description="model width (layernorm, gelu)")
    causal: bool | None = Field(default=None, description="attention: query i sees keys 0..i (default false)")
    backend: Backend | None = Field(default=None, description="attention: torch's SDPA backend (default: torch's)")

    @field_validator("op", mode="before")
    @classmethod
    def _matmul_is_dot(cls, v: Any) -> Any:
        return "dot" if v == "matmul" else v  # study 002 calls the matrix product "dot"

    @field_validator("causal", mode="after")
    @classmethod
    def _not_causal_is_absent(cls, v: bool | None) -> bool | None:
        return True if v else None

    @field_validator("backend", mode="after")
    @classmethod
    def _default_is_absent(cls, v: str | None) -> str | None:
        return None if v == "default" else v

    @model_validator(mode="after")
    def _one_way_to_shape(self) -> OpsParams:
        """size_mb, or the op's transformer dimensions (softmax: either), never both nor a mix."""
        dims = spec.SHAPE_FIELDS.get(self.op, ())
        given = [f for fields in spec.SHAPE_FIELDS.values() for f in fields if getattr(self, f) is not None]
        given = list(dict.fromkeys(given))
        sized_ok = self.op not in spec.TRANSFORMER_OPS
        shaped_ok = bool(dims)
        takes = " or ".join((["size_mb"] if sized_ok else []) + ([", ".join(dims)] if shaped_ok else []))
        wrong = (self.size_mb is not None and (given or not sized_ok)) or (
            self.size_mb is None and (not shaped_ok or set(given) != set(dims)))
        if wrong:
            have = ", ".join((["size_mb"] if self.size_mb is not None else []) + given) or "none"
            raise ValueError(f"op {self.op!r} takes {takes} (given: {have})")
        extra = [f for f in _ATTENTION_ONLY if getattr(self, f) is not None]
        if extra and self.op != "attention":
            raise ValueError(f"{', '.join(extra)} applies to op 'attention' only, not {self.op!r}")
        return self

    @property
    def shaped(self) -> bool:
        """True when the op is shaped by transformer dimensions, not by `size_mb`."""
        return self.size_mb is None

    def shape(self) -> dict[str, int]:
        """The array dimensions: those that give `size_mb` MiB of working set, or the transformer shape's."""
        if self.size_mb is not None:
            return spec.shape_for(self.op, self.size_mb, self.dtype)
        return spec.transformer_shape(self.op, {f: getattr(self, f) for f in spec.SHAPE_FIELDS[self.op]})

    def inputs(self) -> dict[str, np.ndarray]:
        """The seeded float32 NumPy inputs, the same for every framework (each builder casts to its dtype)."""
        return spec.make_inputs(self.op, self.shape())

    def reference(self) -> np.ndarray:
        """The float64 NumPy output every framework's is checked against."""
        return spec.reference(self.op, self.inputs(), causal=bool(self.causal))

    def require_default_backend(self, framework: str) -> None:
        """For a framework with one attention implementation: a chosen backend is `unsupported`, with why."""
        if self.backend is not None:
            raise UnsupportedError(f"{framework} has one attention implementation (backend default), not "
                                   f"{self.backend}: the backends are torch's (SDPBackend)")

    def working_set_mb(self) -> float:
        """The working set in MiB: `size_mb` as asked, or the compulsory bytes of a transformer shape."""
        if self.size_mb is not None:
            return self.size_mb
        return float(spec.cost(self.op, self.shape(), self.dtype).bytes_moved or 0.0) / 2**20


class Ops(Workload[OpsParams]):
    name = "ops"
    description = ("single ops (add, mul, scalar, sigmoid, tanh, dot, relu, softmax, conv2d) at a working-set size; "
                   "attention, layernorm, gelu, softmax at transformer shapes")
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
