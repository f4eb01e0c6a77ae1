"""What a model case records beside its timing: the step's figures (`ModelInfo`, `ModelStep.info`, which
`Model.extra_metrics` adds to the case's metrics), a compiled or runtime variant's compile (`CompileRecord`),
an int8 path's quantization (`Int8Record`) and an ONNX export's or file's meta (`RuntimeMeta`).

TypedDicts of the keys the builders write today (no runtime change): a key is present only where its builder
writes it, so all are optional.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from dlperf.sources import SourceInfo
from dlperf.workloads.model.gate import Verdict

if TYPE_CHECKING:
    import numpy as np


class BreakReason(TypedDict):
    """One graph break torch._dynamo.explain found: why (its first lines) and where (file:line in function)."""

    reason: str
    where: str | None


class CompileRecord(TypedDict, total=False):
    """A variant's compile: torch.compile's cold compile here and warm one in a fresh process
    (`torch_compiled`), or a runtime's session creation or `compile_model` (`what` says which)."""

    variant: str
    cold_s: float
    what: str
    cache_dir: str
    cold_cache_files_before: int
    cold_cache_files_after: int
    cold_counters: dict[str, int]
    headers: str
    warm_s: float
    warm_cache_files_before: int
    warm_counters: dict[str, int]
    warm_error: str
    graph_breaks: int
    graphs: int
    break_reasons: list[BreakReason]
    graph_breaks_error: str


class Int8Record(TypedDict, total=False):
    """What became int8 and by which quantizer (`quantized`)."""

    quantizer: str
    executed: str
    engine: str
    file: str
    dynamic_quantization_group_size: int


class Int8Done(TypedDict, total=False):
    """What a quantizer in `quantized` returns beside its model: the record, and OpenVINO's MFU dtype."""

    int8: Int8Record
    mfu_dtype: str


class OnnxFileInputs(TypedDict):
    """A FILE.onnx source's `model_info`: each input's shape at the case's batch."""

    inputs: dict[str, list[int]]


class RuntimeMeta(TypedDict, total=False):
    """An ONNX export's `meta.json` (`export`) or a FILE.onnx's meta (`onnx_file`), with what a runtime path
    adds while it builds (`int8`, `compile`, and `_refs`, the reference outputs when called, popped by
    `onnxruntime_model.info_of`)."""

    self_check: Verdict | None
    not_checked: str | None
    n_outputs: int
    flops_per_call: float | None
    param_count: int
    model_info: SourceInfo | OnnxFileInputs
    exporter: str | None
    dynamo_failure: str
    inputs: list[str]
    reference: str
    int8: Int8Record
    compile: CompileRecord
    _refs: Callable[[], list[np.ndarray] | None]


class ModelInfo(TypedDict, total=False):
    """A model step's own figures (`ModelStep.info`): the module's, the variant's, and the gate, called after the
    timing (`Model.extra_metrics` stores its verdict as `correctness`)."""

    param_count: int
    source: str
    model_info: SourceInfo | OnnxFileInputs | None
    mfu_dtype: str
    flops_per_call: float | None
    exporter: str | None
    reference: str
    int8: Int8Record
    compile: CompileRecord
    variant: str
    loss: str
    prompt_len: int
    new_tokens: int
    gate: Callable[[], Verdict]
