"""The ops in ONNX Runtime: each op one ONNX node (`onnx_graph`), run by an InferenceSession of the adapter's
(`fw.session`: its threads, all graph optimisations) on the CPU provider, or CUDA's where the build has it.

What a timed call includes. The inputs are OrtValues made once, on the session's device, and bound once to an
IOBinding with a preallocated output OrtValue; the step is `session.run_with_iobinding(binding)`. So a timed call
is ONNX Runtime's run of the node (its per-run overhead and the kernel) writing into the kept output: no feeds
are converted or copied and no output is allocated per call. That is what NumPy and torch do with `out=` for the
elementwise ops and dot; torch's softmax, conv2d, layernorm, gelu and attention have no `out=` and allocate their
output per call, which this step does not. The plain
`session.run(None, feeds)` a serving program writes would add, per call, wrapping the feeds (CPU NumPy inputs are
read in place) and a freshly allocated output array (on CUDA also the host-device copies of both).

Dtypes: whatever kernels the provider registers. ONNX Runtime never lowers a dtype: a node it has no kernel for
fails to open (NOT_IMPLEMENTED), which is `unsupported` with ONNX Runtime's message (the CPU provider has no
bfloat16 kernels for most ops). For float16 nodes it lacks, the CPU provider inserts casts and computes in float32
(more precision, not less; the arrays stay float16): such a float16 case times float32 arithmetic plus the casts,
not float16 arithmetic, which the stored case does not say (only this docstring and docs/studies.md). bfloat16
inputs are fed as raw 16-bit words (NumPy has no bfloat16 that ONNX Runtime converts), on the CPU only.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.onnx_graph import array_nbytes, build_graph, numpy_dtype, onnx_type


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    ort = fw.import_module()
    g = build_graph(p)
    try:
        session = fw.session(g.model, device)  # type: ignore[attr-defined]
    except UnsupportedError:
        raise
    except Exception as exc:  # no kernel for this node in this dtype on this provider
        if "NOT_IMPLEMENTED" not in str(exc):
            raise
        raise UnsupportedError(f"onnxruntime {ort.__version__} on {device} cannot run {p.op} in {p.dtype}: "
                               f"{str(exc).strip()}"[:400]) from None
    kind, _, index = device.partition(":")
    dev_id = int(index or 0)
    bf16 = p.dtype == "bfloat16"
    if bf16 and kind != "cpu":
        raise UnsupportedError("dlperf feeds bfloat16 to onnxruntime on the CPU only (as raw 16-bit words)")
    et, npdt = onnx_type(p.dtype), numpy_dtype(p.dtype)

    def ortvalue(arr: np.ndarray) -> Any:
        if bf16:  # references arr's memory: kept alive by `feeds` below
            return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr.view(np.uint16), et)
        return ort.OrtValue.ortvalue_from_numpy(arr, kind, dev_id)

    feeds = {k: (v, ortvalue(v)) for k, v in g.feeds.items()}
    out = ort.OrtValue.ortvalue_from_shape_and_type(list(g.out_shape), et if bf16 else npdt, kind, dev_id)
    binding = session.io_binding()
    for name, (_, value) in feeds.items():
        binding.bind_ortvalue_input(name, value)
    binding.bind_ortvalue_output("out", out)
    out_nbytes = int(np.prod(g.out_shape)) * npdt.itemsize

    def step(_alive: object = feeds) -> Any:  # the bound OrtValues read these arrays in place: kept alive here
        session.run_with_iobinding(binding)
        return out

    def result() -> np.ndarray:
        if not bf16:
            return np.asarray(out.numpy(), dtype=np.float64)
        words = np.ctypeslib.as_array(ctypes.cast(out.data_ptr(), ctypes.POINTER(ctypes.c_uint16)),
                                      shape=g.out_shape).copy()
        return words.view(npdt).astype(np.float64)

    return Step(step, result, array_nbytes=lambda: array_nbytes(g, out_nbytes))
