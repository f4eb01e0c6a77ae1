"""Why a framework cannot run a `dlperf bench` case at all, said before any store is opened.

`dlperf bench` asks each framework x device x precision it was given; where none of them runs, it ends in one
`dlperf: error:` line (the first reason) rather than a stored run of `unsupported` cases and exit 0. The checks are
the builders' own (`modes.check` for TensorFlow and JAX, `quantized` for torch's precisions on a device and task,
`onnxruntime_model.check` for the runtimes), so the line says what the worker would have said.
"""

from __future__ import annotations

from dlperf.frameworks import REGISTRY, UnsupportedError, get_framework
from dlperf.workloads.model import ModelParams, modes, onnxruntime_model, quantized

#: The families whose model builders run the runtime checks (`onnxruntime_model.check`).
RUNTIMES = ("onnxruntime", "openvino")


def refusal(framework: str, device: str, p: ModelParams) -> str | None:
    """Why `framework` cannot run the case `p` on `device` whatever the batch, or None (it may run)."""
    why = modes.refusal(framework, p)
    cls = REGISTRY.get(framework)
    if why is not None or cls is None:
        return why
    try:
        if cls.family == "torch":
            quantized.check_device(p, device.split(":")[0])
            quantized.check_task(p)
        elif cls.family in RUNTIMES:
            onnxruntime_model.check(get_framework(framework), p)
    except UnsupportedError as exc:
        return str(exc)
    return None
