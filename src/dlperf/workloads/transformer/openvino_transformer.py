"""Transformer inference (the logits forward) on OpenVINO: the torch model exported to ONNX once, compiled at
the case's precision (fp32: f32 stated, since the CPU plugin would otherwise run bf16 where the CPU has it;
bf16: the bf16 hint; fp16: the f16 hint where this CPU's plugin lists FP16).

Task infer only: training and generation end `unsupported` with the reason. Weights and inputs as
`onnxruntime_transformer`. The sequence axis is fixed at the case's seq_len (and the timed model's batch axis at
its batch) before compiling; the executed nodes' precisions are checked (`runtime_steps`).
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.models import onnx_export
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.base import Step
from dlperf.workloads.transformer import TransformerParams
from dlperf.workloads.transformer.onnxruntime_transformer import inputs


def model_path(fw: Framework, p: TransformerParams) -> Any:
    """The exported model this builder runs (checks first; seed 0, torch's transformer weights)."""
    rs.check_task(fw, p.task)
    return onnx_export.export_transformer(p.config(), seed=0, isolated=True)


def compiled(fw: Framework, device: str, p: TransformerParams) -> Any:
    """The CompiledModel this builder times (the case's precision, the adapter's threads, static shapes)."""
    assert p.seq_len is not None
    return rs.ov_compiled(fw, device, model_path(fw, p), p.precision, [p.batch, p.seq_len])


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    return rs.ov_step(fw, device, model_path(fw, p), p.precision, inputs(p))
