"""The ops in OpenVINO: each op one ONNX node (`onnx_graph`), read and compiled by the adapter (`fw.compile`: its
threads, one stream, the latency hint, the precision stated) on the CPU plugin.

What a timed call includes. One InferRequest is made at build; its input tensors share the NumPy inputs' memory
(set once, never copied) and its output tensor is the request's own, allocated once and rewritten by every call;
the step is `request.infer(share_outputs=True)`. So a timed call is OpenVINO's inference of the compiled node
(its per-call overhead and the kernel), writing into the kept output as NumPy and torch write into `out=`.
OpenVINO's default call, `compiled_model(feeds)`, would add a copy of every input into the request and of the
output out of it, per call.

Dtypes. The precision hint is stated (`PRECISION`: f32 for float32 and float16, bf16 for bfloat16), so the plugin
never lowers a float32 case to bfloat16 (its default on CPUs with AVX512_BF16 or AMX). The CPU plugin has no
float64 kernels: it converts float64 inputs to f32, computes in f32 and converts back. After compiling, every
executed node's runtime precision is read from the runtime model, and a case computed below its dtype anywhere
(float64 in f32) is `unsupported`, naming the nodes, never timed as if it were float64. Computing above it (a
float16 MatMul in f32) is allowed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.onnx_graph import array_nbytes, build_graph, numpy_dtype

#: The case's dtype -> the adapter's precision (INFERENCE_PRECISION_HINT): the lowest the plugin may compute in.
#: float16 gets f32: with an f16 hint a CPU without float16 arithmetic (no AVX512_FP16/AMX-FP16) runs MatMul,
#: Convolution and attention in bf16 (seen here); with f32 they run in f32. float64 has none (refused below).
PRECISION = {"float32": "fp32", "float64": "fp32", "float16": "fp32", "bfloat16": "bf16"}
#: Runtime precisions of executed nodes that keep a case's dtype (its own, or wider).
KEEPS = {"float64": {"f64"}, "float32": {"f32", "f64"}, "float16": {"f16", "f32", "f64"},
         "bfloat16": {"bf16", "f32", "f64"}}
FLOAT_PRECISIONS = {"f64", "f32", "f16", "bf16"}


def executed_precisions(compiled: Any) -> list[tuple[str, str, str]]:
    """(node, layer type, runtime precision) of every executed floating-point node of a compiled model."""
    out = []
    for node in compiled.get_runtime_model().get_ordered_ops():
        rt = node.get_rt_info()
        layer, precision = rt["layerType"].astype(str), rt["runtimePrecision"].astype(str)
        if layer not in ("Input", "Output", "Const") and precision in FLOAT_PRECISIONS:
            out.append((node.get_friendly_name(), layer, precision))
    return out


def check_precision(compiled: Any, dtype: str, version: str) -> None:
    """UnsupportedError when any executed node computes below `dtype` (e.g. float64 in f32)."""
    lower = [(layer, prec) for _, layer, prec in executed_precisions(compiled) if prec not in KEEPS[dtype]]
    if lower:
        nodes = ", ".join(sorted({f"{layer} in {prec}" for layer, prec in lower}))
        raise UnsupportedError(f"openvino {version}'s CPU plugin computes this {dtype} case in "
                               f"{', '.join(sorted({prec for _, prec in lower}))} (runtime model: {nodes}); "
                               f"refused rather than timed as {dtype}")


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    ov = fw.import_module()
    g = build_graph(p)
    compiled = fw.compile(g.model, device, PRECISION[p.dtype])  # type: ignore[attr-defined]
    check_precision(compiled, p.dtype, fw.version or ov.get_version())
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
