"""CNN inference on OpenVINO: the torch CNN exported to ONNX once (`models.onnx_export`), compiled at f32.

Task infer only (training ends `unsupported`). The inference precision is stated as f32 (OpenVINO's CPU plugin
would otherwise run bf16 on a CPU that has it); amp has no meaning here. Inputs as `onnxruntime_cnn.inputs`.
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


def compiled(fw: Framework, device: str, p: CnnParams) -> Any:
    """The CompiledModel this builder times (f32 inference precision, the adapter's threads)."""
    rs.check_task(fw, p.task)
    rs.check_precision(fw, p.precision, ("fp32",), AMP_REASON)
    path = onnx_export.export_cnn(p.model, p.image_size, p.num_classes, seed=0, isolated=True)
    return rs.ov_compiled(fw, device, path, "fp32")


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    return rs.inference_step(rs.ov_runner(compiled(fw, device, p)), inputs(p))
