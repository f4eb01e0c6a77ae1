"""CNN inference on ONNX Runtime: the torch CNN exported to ONNX once (`models.onnx_export`), fp32.

Task infer only (training ends `unsupported`). Weights: torch's init after `torch.manual_seed(seed)`, the case's
seed (`runtime_steps.export_seed`), as torch's builder draws them; input: a float32 NCHW batch of the model's shape
drawn from NumPy's generator seeded 0, made once before timing. What a timed call does (the forward through an
IOBinding; on a GPU also the logits' copy to the host, as torch's infer step makes): `runtime_steps`.
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.models import onnx_export
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.base import Step
from dlperf.workloads.cnn import CnnParams

#: Why amp is not run: a runtime has no autocast.
AMP_REASON = ("amp is torch/TensorFlow autocast; ONNX Runtime runs the exported float32 graph, and dlperf makes no "
              "low-precision copy of it")


def session(fw: Framework, device: str, p: CnnParams) -> Any:
    """The InferenceSession this builder times (checks first, then the cached export)."""
    rs.check_task(fw, p.task)
    rs.check_precision(fw, p.precision, ("fp32",), AMP_REASON)
    path = onnx_export.export_cnn(p.model, p.image_size, p.num_classes, seed=rs.export_seed(fw), isolated=True)
    return rs.ort_session(fw, device, path)


def inputs(p: CnnParams) -> Any:
    """The seeded float32 NCHW batch (the same for ONNX Runtime and OpenVINO)."""
    import numpy as np

    s = p.spec()
    return np.random.default_rng(0).standard_normal((p.batch, s.in_channels, p.size(), p.size()), dtype=np.float32)


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    return rs.ort_step(fw, session(fw, device, p), device, inputs(p), copy_to_host=True)
