"""The model workload on OpenVINO: the torch source exported to ONNX (`export`), compiled at f32 (int8: its
weights compressed by NNCF first, `quantized.ov_int8`; the `ov:*` variants: the performance hint, `compile_model`
recorded as their compile) with the static shapes of the export (the case's; a
FILE.onnx source: the file, its symbolic dimensions fixed at the case's), inference only; each input shares its
NumPy array's memory with the request; outputs checked against the eager fp32 reference by `gate` (executed
precisions checked as `runtime_steps`)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams, quantized
from dlperf.workloads.model.onnxruntime_model import info_of, runtime_inputs
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.step import ModelStep
from dlperf.workloads.model.variants import EAGER, ov_hint


def build(fw: Framework, device: str, p: ModelParams) -> Step:
    from dlperf.frameworks.openvino_fw import check_executed_precision

    ov = fw.import_module()
    path, feeds, refs, meta = runtime_inputs(fw, p)
    mfu: ModelInfo = {}
    hint, start = ov_hint(p.variant), time.perf_counter()
    if p.precision == "int8" and hint != "LATENCY":
        raise UnsupportedError(f"variant {p.variant} with int8: NNCF's compressed model is compiled at the LATENCY "
                               "hint only")
    if p.precision == "int8":  # NNCF's int8 weights (nothing computed below f32 either: checked below)
        compiled, done = quantized.ov_int8(fw, path, device, feeds if p.source.endswith(".onnx") else None)
        mfu["mfu_dtype"] = done.pop("mfu_dtype")
        meta |= done
    elif p.source.endswith(".onnx"):  # the file's symbolic dimensions fixed at the case's (static shapes)
        from dlperf.frameworks.openvino_fw import DEVICES

        if device not in DEVICES:
            raise UnsupportedError(f"openvino has no device {device!r} in dlperf (cpu)")
        ov_model = fw.core().read_model(str(path))  # type: ignore[attr-defined]
        ov_model.reshape({name: ov.PartialShape(list(a.shape)) for name, a in feeds.items()})
        compiled = fw.core().compile_model(ov_model, DEVICES[device],  # type: ignore[attr-defined]
                                           fw.compile_config("fp32", hint))  # type: ignore[attr-defined]
    else:
        compiled = fw.compile(str(path), device, "fp32", hint=hint)  # type: ignore[attr-defined]
    if p.variant != EAGER:  # compile_model is this variant's compile
        meta["compile"] = {"variant": p.variant, "cold_s": time.perf_counter() - start,
                           "what": f"read_model and compile_model with PERFORMANCE_HINT {hint}"
                                   + (" (int8: NNCF's weight compression included)" if p.precision == "int8" else "")}
    check_executed_precision(compiled, "float32", fw.version or ov.get_version())
    request = compiled.create_infer_request()
    for name, array in feeds.items():
        request.set_tensor(name, ov.Tensor(array, shared_memory=True))

    def fn(_feeds: Any = feeds) -> Any:
        return request.infer(share_outputs=True)

    def outputs() -> list[np.ndarray]:
        fn()
        return [np.array(request.get_output_tensor(i).data, dtype=np.float64) for i in range(len(compiled.outputs))]

    meta["_refs"] = refs
    return ModelStep(fn, lambda: outputs()[0], info=info_of(meta, p, outputs) | mfu)
