"""The ops in OpenVINO: each op one ONNX node (`onnx_graph`), read and compiled by the adapter (`fw.compile`: its
threads, one stream, the latency hint, the precision stated) on the CPU plugin.

What a timed call includes. One InferRequest is made at build; its input tensors share the NumPy inputs' memory
(set once, never copied) and its output tensor is the request's own, allocated once and rewritten by every call;
the step is `request.infer(share_outputs=True)`. So a timed call is OpenVINO's inference of the compiled node
(its per-call overhead and the kernel), writing into the kept output as torch writes into `out=` for the
elementwise ops and dot; torch's softmax, conv2d, layernorm, gelu and attention have no `out=` and allocate their
output per call, which this step does not. OpenVINO's default call, `compiled_model(feeds)`, would add a copy of
every input into the request and of the output out of it, per call.

Dtypes. The precision hint is stated (`PRECISION`: f32 for float32 and float16, bf16 for bfloat16), so the plugin
never lowers a float32 case to bfloat16 (its default on CPUs with AVX512_BF16 or AMX). The CPU plugin has no
float64 kernels: it converts float64 inputs to f32, computes in f32 and converts back. After compiling, every
executed node's runtime precision is read from the runtime model, and a case computed below its dtype anywhere
(float64 in f32) is `unsupported`, naming the nodes, never timed as if it were float64. Computing above it is
allowed: a float16 case runs in f32 (the f32 hint, so every float16 op here computes in float32 between float16
inputs and output) -- it times OpenVINO's float16 path, not float16 arithmetic, and the float16 rows say so only
here and in docs/studies.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.frameworks.openvino_fw import check_executed_precision, executed_precisions  # noqa: F401 (re-export)
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.onnx_graph import array_nbytes, build_graph, numpy_dtype

#: The case's dtype -> the adapter's precision (INFERENCE_PRECISION_HINT): the lowest the plugin may compute in.
#: float16 gets f32: with an f16 hint a CPU without float16 arithmetic (no AVX512_FP16/AMX-FP16) runs MatMul,
#: Convolution and attention in bf16 (seen here); with f32 they run in f32. float64 has none (refused below).
PRECISION = {"float32": "fp32", "float64": "fp32", "float16": "fp32", "bfloat16": "bf16"}


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    ov = fw.import_module()
    g = build_graph(p)
    compiled = fw.compile(g.model, device, PRECISION[p.dtype])  # type: ignore[attr-defined]
    check_executed_precision(compiled, p.dtype, fw.version or ov.get_version())
    request = compiled.create_infer_request()
    bf16 = p.dtype == "bfloat16"
    tensors = {}
    for name, arr in g.feeds.items():
        if bf16:  # OpenVINO's Python API has no NumPy bfloat16: a bf16 tensor filled with the raw 16-bit words
            t = ov.Tensor(ov.Type.bf16, list(arr.shape))
            t.data.view(np.uint16)[...] = arr.view(np.uint16)
        else:
            t = ov.Tensor(arr, shared_memory=True)
        tensors[name] = t
        request.set_tensor(name, t)
    npdt = numpy_dtype(p.dtype)

    alive = (tensors, g.feeds)  # the request reads the NumPy inputs in place: they live as long as the step

    def step(_alive: object = alive) -> Any:
        return request.infer(share_outputs=True)

    def output() -> np.ndarray:
        data = request.get_output_tensor(0).data
        return data.view(np.uint16).view(npdt) if bf16 else data

    def result() -> np.ndarray:
        return np.asarray(output(), dtype=np.float64).reshape(g.out_shape)

    return Step(step, result, array_nbytes=lambda: array_nbytes(g, int(output().nbytes)))
