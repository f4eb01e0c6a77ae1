"""The model workload on OpenVINO: the torch source exported to ONNX (`export`), compiled at f32 with the static
shapes of the export (the case's), inference only; each input shares its NumPy array's memory with the request;
outputs checked against the eager fp32 reference by `gate` (executed precisions checked as `runtime_steps`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams
from dlperf.workloads.model.onnxruntime_model import info_of, runtime_inputs
from dlperf.workloads.model.torch_model import ModelStep


def build(fw: Framework, device: str, p: ModelParams) -> Step:
    from dlperf.frameworks.openvino_fw import check_executed_precision

    ov = fw.import_module()
    path, feeds, refs, meta = runtime_inputs(fw, p)
    compiled = fw.compile(str(path), device, "fp32")  # type: ignore[attr-defined]
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
    return ModelStep(fn, lambda: outputs()[0], info=info_of(meta, p, outputs))
