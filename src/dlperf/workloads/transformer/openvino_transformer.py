"""Transformer inference (the logits forward) on OpenVINO: the torch model exported to ONNX once, compiled at
the case's precision (fp32: f32 stated, since the CPU plugin would otherwise run bf16 where the CPU has it;
bf16: the bf16 hint; fp16: the f16 hint where this CPU's plugin lists FP16).

Task infer only: training and generation end `unsupported` with the reason. Inputs as `onnxruntime_transformer`.
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.models import onnx_export
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.base import Step
from dlperf.workloads.transformer import TransformerParams
from dlperf.workloads.transformer.onnxruntime_transformer import inputs


def compiled(fw: Framework, device: str, p: TransformerParams) -> Any:
    """The CompiledModel this builder times (the case's inference precision, the adapter's threads)."""
    rs.check_task(fw, p.task)
    return rs.ov_compiled(fw, device, onnx_export.export_transformer(p.config(), seed=0, isolated=True), p.precision)


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    return rs.inference_step(rs.ov_runner(compiled(fw, device, p)), inputs(p))
