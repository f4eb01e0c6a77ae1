"""CNN inference on OpenVINO: the torch CNN exported to ONNX once (`models.onnx_export`), compiled at f32.

Task infer only (training ends `unsupported`). The inference precision is stated as f32 (OpenVINO's CPU plugin
would otherwise run bf16 on a CPU that has it), and the executed nodes' precisions are checked; amp has no meaning
here. Weights and inputs as `onnxruntime_cnn`; static shapes and what a timed call does: `runtime_steps`.
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.models import onnx_export
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.base import Step
from dlperf.workloads.cnn import CnnParams
from dlperf.workloads.cnn.onnxruntime_cnn import inputs

AMP_REASON = ("amp is torch/TensorFlow autocast; OpenVINO runs the whole graph at one inference precision, and "
              "the cnn workload has no field for a bf16 one")


def model_path(fw: Framework, p: CnnParams) -> Any:
    """The exported model this builder runs (checks first)."""
    rs.check_task(fw, p.task)
    rs.check_precision(fw, p.precision, ("fp32",), AMP_REASON)
    return onnx_export.export_cnn(p.model, p.image_size, p.num_classes, seed=rs.export_seed(fw), isolated=True)


def compiled(fw: Framework, device: str, p: CnnParams) -> Any:
    """The CompiledModel this builder times (f32, the adapter's threads, static at the built batch)."""
    s = p.spec()
    return rs.ov_compiled(fw, device, model_path(fw, p), "fp32", [p.batch, s.in_channels, p.size(), p.size()])


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    return rs.ov_step(fw, device, model_path(fw, p), "fp32", inputs(p))
