"""`model`: a user's own model (a source: `dlperf bench SOURCE`, a study's `source:`), on torch and, through the
ONNX export, on ONNX Runtime and OpenVINO, each path checked against the eager fp32 reference; in torch also
compiled (`variant`: the names in `variants`, built by `torch_compiled`).

Tasks: `infer` (one forward pass on `batch` inputs, no gradients; every call timed alone, for p50/p90/p99),
`train` (one optimizer step: forward, the loss, backward, SGD lr 1e-3; the loss is the source's `loss(outputs,
batch)` where it has one, else the default of `training.default_loss`), `generate` (a causal LM: greedy
decoding of `new_tokens` tokens after a `prompt_len`-token prompt, with its KV cache; TTFT and decode time per
call). Precisions: fp32, bf16 (torch autocast), fp16 (torch autocast on CUDA), int8 (each runtime's own
quantizer, task infer: `quantized`). Samples are the batch's items (generate: generated tokens). FLOPs per call
are counted by torch's `FlopCounterMode` on the eager module at the case's inputs (the same figure on every
path); the correctness gate is `gate`'s. The builders are the `<family>_model` modules beside this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dlperf.frameworks import REGISTRY, Framework, UnsupportedError
from dlperf.workloads import xla_compile
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams
from dlperf.workloads.model import modes
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.variants import EAGER, adapter_name, check_variant, not_run_by, runs

#: The dtype each precision's peak is read for (MFU).
PRECISION_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "int8"}


class ModelParams(WorkloadParams):
    OMIT_AT_DEFAULT = ("variant",)  # eager: a plain bench's case keys as they were before variants

    source: str = Field(description="dlperf:NAME, hf:ARCH[,k=v...], hf:PATH, FILE.onnx, file.py:NAME, pkg.mod:NAME")
    task: Literal["infer", "train", "generate"] = "infer"
    batch: int = Field(default=1, gt=0, description="samples per call")
    seq: int | None = Field(default=None, gt=0, description="sequence length (S in --input; token models)")
    input: list[str] | None = Field(default=None, description="NAME:DTYPE[DIMS] per positional input")
    inputs_fn: str | None = Field(default=None, description="path.py:FN, called with the batch size")
    precision: Literal["fp32", "bf16", "fp16", "int8"] = Field(
        default="fp32", description="bf16: torch autocast; fp16: CUDA autocast; int8: each runtime's quantizer")
    prompt_len: int | None = Field(default=None, gt=0, description="generate: prompt tokens (default 32)")
    new_tokens: int | None = Field(default=None, gt=0, description="generate: tokens per call (default 16)")
    variant: str = Field(default="eager", description="eager, compile[:MODE], export, ort:LEVEL, ov:HINT (`variants`)")

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        from dlperf.sources import SourceError, check_text

        try:
            check_text(v)
        except SourceError as exc:
            raise ValueError(str(exc)) from None
        return v

    @field_validator("variant")
    @classmethod
    def _variant(cls, v: str) -> str:
        return check_variant(v)

    @field_validator("input")
    @classmethod
    def _inputs(cls, v: list[str] | None) -> list[str] | None:
        from dlperf.sources import SourceError
        from dlperf.sources.inputs import parse_input

        for text in v or []:
            try:
                parse_input(text)
            except SourceError as exc:
                raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ModelParams:
        if self.input and self.inputs_fn:
            raise ValueError("give --input or --inputs, not both")
        if self.task != "generate" and (self.prompt_len or self.new_tokens):
            raise ValueError(f"prompt_len and new_tokens apply to task generate, not {self.task}")
        return self

    @property
    def dtype(self) -> str:
        return PRECISION_DTYPE[self.precision]

    def generation(self) -> tuple[int, int]:
        """(prompt_len, new_tokens) of a generate case."""
        return self.prompt_len or 32, self.new_tokens or 16


class Model(Workload[ModelParams]):
    name = "model"
    description = "a user's model (a source): infer, train or generate, checked against the eager fp32 reference"
    Params = ModelParams
    memory_axis = "batch"

    def adapter(self, framework: str, raw: Mapping[str, object]) -> str:
        """TensorFlow's and JAX's variants are their adapters' modes: tensorflow + xla runs on `tensorflow-xla`,
        jax + eager on `jax-nojit` (`variants.MODE_ADAPTERS`); any other framework is itself."""
        cls = REGISTRY.get(framework)
        if cls is None or framework != cls.family:
            return framework
        return adapter_name(framework, cls.family, str(raw.get("variant") or EAGER))

    def build(self, fw: Framework, device: str, params: ModelParams) -> Step:
        """The framework's builder; a compiler variant on a framework that has none is unsupported, said why.
        TensorFlow and JAX build in the variant's mode (`modes.mode_adapter`), an XLA mode's compile recorded
        (`xla_compile`: its cache set before the build, the warm compile after the timing)."""
        if not runs(fw.family, params.variant):
            raise UnsupportedError(not_run_by(fw.name, params.variant))
        if fw.family not in modes.FAMILIES:
            return super().build(fw, device, params)
        modes.check(fw.family, params)  # before any cache folder is made
        mode = modes.mode_adapter(fw, params.variant)
        cache = xla_compile.begin(mode)
        step = super().build(mode, device, params)
        if mode is not fw and fw.family == "jax":  # the caller's adapter prepares it: enter the mode here
            step = replace(step, fn=modes.in_mode(mode, step.fn))
        info: ModelInfo = getattr(step, "info", ModelInfo())
        return xla_compile.tracked(self.name, mode, device, params, step, cache, modes.XlaModelStep, info=info)

    def cost(self, params: ModelParams) -> Cost:
        samples = params.batch * params.generation()[1] if params.task == "generate" else params.batch
        return Cost(flops=None, samples=samples)  # FLOPs are counted on the built model (`built_cost`)

    def built_cost(self, params: ModelParams, step: Step) -> Cost:
        info: ModelInfo = getattr(step, "info", ModelInfo())
        return Cost(flops=info.get("flops_per_call"), samples=self.cost(params).samples)

    def per_call_timing(self, params: ModelParams) -> bool:
        """Every call timed alone: p50/p90/p99 of single calls (the batch-1 latency tails)."""
        return True

    def extra_metrics(self, params: ModelParams, step: Step) -> dict[str, Any]:
        """The model's own figures (parameters, FLOPs, the correctness gate's verdict), after timing."""
        info = dict(getattr(step, "info", {}))
        info |= xla_compile.record(step)  # an XLA mode's cold and warm compile (none for any other step)
        gate = info.pop("gate", None)
        if callable(gate):
            try:
                info["correctness"] = gate()
            except MemoryError:  # under a memory cap, the check's copies may not fit where the timed path did
                info["correctness"] = {"status": "not checked", "reason": "the check ran out of memory after the "
                                       "timing (the reference's float64 copies beside the path's outputs)"}
        return info


__all__ = ["PRECISION_DTYPE", "Model", "ModelParams"]
