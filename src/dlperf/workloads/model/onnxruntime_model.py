"""The model workload on ONNX Runtime: the torch source exported to ONNX (`export`, in a child with torch), fp32
(int8: that file through onnxruntime's quantizer, `quantized.ort_int8`; the `ort:*` variants: its graph
optimisation level, the session's creation recorded as their compile), inference only (a FILE.onnx source: the
file itself, `onnx_file`); every input bound once through an IOBinding, the outputs bound on the device (as
`runtime_steps` does for the CNN); outputs checked against the eager fp32 reference by `gate`."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams, gate, quantized
from dlperf.workloads.model.export import prepared
from dlperf.workloads.model.records import ModelInfo, RuntimeMeta
from dlperf.workloads.model.step import ModelStep
from dlperf.workloads.model.variants import EAGER, ort_level

#: The reference outputs of a runtime path, read or run when called (None: there is none; meta says why).
Reference = Callable[[], "list[np.ndarray] | None"]

WHY_FP32 = ("a runtime runs the exported float32 graph, or its int8 copy from the runtime's own quantizer; dlperf "
            "makes no bf16 or fp16 copy of it")


def check(fw: Framework, p: ModelParams) -> None:
    """UnsupportedError where a runtime cannot run the case at all: a task but infer, a precision but fp32 or int8
    (also what `dlperf bench` says before any store, `refusals`)."""
    rs.check_task(fw, p.task)
    rs.check_precision(fw, p.precision, ("fp32", "int8"), WHY_FP32)


def runtime_inputs(fw: Framework, p: ModelParams) -> tuple[Path, dict[str, np.ndarray], Reference, RuntimeMeta]:
    """Checks, then (model path, feeds, the reference outputs when called, meta) of the case's export, or of its
    ONNX file (`onnx_file`: the graph's declared inputs, onnxruntime's unoptimised fp32 outputs the reference).
    The reference is read or run when the gate asks, after the timing, so it is not in the case's memory."""
    check(fw, p)
    # int8: the fp32 export's file, quantized beside it; a runtime variant: the one export every variant shares
    fp32 = p.model_copy(update={"precision": "fp32", "variant": "eager"})
    if p.source.endswith(".onnx"):
        from dlperf.workloads.model import onnx_file

        return onnx_file.prepared(fp32, rs.export_seed(fw))
    return prepared(fp32, rs.export_seed(fw))


def info_of(meta: RuntimeMeta, p: ModelParams, outputs: Any) -> ModelInfo:
    """The case's figures from the export, and the gate on `outputs()` (the runtime's last outputs)."""
    reference: Reference = meta.pop("_refs")

    def checked() -> gate.Verdict:
        refs = reference()
        if refs is None:
            return gate.not_checked(meta.get("not_checked") or "no reference outputs")
        return meta["self_check"] or gate.judge(outputs(), refs, p.precision)

    info: ModelInfo = {"param_count": meta["param_count"], "flops_per_call": meta["flops_per_call"],
                       "source": p.source, "model_info": meta.get("model_info"), "mfu_dtype": p.dtype,
                       "exporter": meta.get("exporter"), "gate": checked}
    # then, in this order, those the meta holds (and not empty), and a variant other than eager
    if meta.get("reference"):
        info["reference"] = meta["reference"]
    if meta.get("int8"):
        info["int8"] = meta["int8"]
    if meta.get("compile"):
        info["compile"] = meta["compile"]
    if p.variant != EAGER:
        info["variant"] = p.variant
    return info


def build(fw: Framework, device: str, p: ModelParams) -> Step:
    ort = fw.import_module()
    path, feeds, refs, meta = runtime_inputs(fw, p)
    if p.precision == "int8":
        path, done = quantized.ort_int8(path)
        meta |= done
    start = time.perf_counter()
    sess = fw.session(str(path), device, ort_level(p.variant))  # type: ignore[attr-defined]
    if p.variant != EAGER:  # the session's graph optimisation is this variant's compile
        meta["compile"] = {"variant": p.variant, "cold_s": time.perf_counter() - start,
                           "what": "InferenceSession creation (graph optimisation at this level)"}
    kind, _, index = device.partition(":")
    binding = sess.io_binding()
    kept = {n: ort.OrtValue.ortvalue_from_numpy(a, kind, int(index or 0)) for n, a in feeds.items()}
    for name, value in kept.items():
        binding.bind_ortvalue_input(name, value)
    for out in sess.get_outputs():
        binding.bind_output(out.name, kind, int(index or 0))
    binding.synchronize_inputs()

    def fn(_kept: Any = kept) -> Any:
        sess.run_with_iobinding(binding)
        return binding

    def outputs() -> list[np.ndarray]:
        fn()
        return [np.asarray(o, dtype=np.float64) for o in binding.copy_outputs_to_cpu()]

    meta["_refs"] = refs
    return ModelStep(fn, lambda: outputs()[0], info=info_of(meta, p, outputs))
