"""What the ONNX Runtime and OpenVINO builders of the cnn and transformer workloads share.

Both runtimes serve a model exported once from PyTorch (`models.onnx_export`, in a child process, so a runtime's
worker never imports torch). They run inference only: a training step, or generation (which would need a graph
with a KV cache per decode step; only the logits forward is exported), ends `unsupported` with the reason.
Inputs are NumPy arrays made once, before timing; a call is synchronous (its outputs are on the host when it
returns), so `fn` and `predict(n)` need no sync.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step

#: Why a task other than infer is not run on an inference runtime.
TASK_REASONS = {
    "train": "is an inference runtime: dlperf runs no training on it (the exported ONNX graph is the forward "
             "pass only)",
    "generate": "runs the exported logits forward only: generation would need a graph with a KV cache per decode "
                "step, which dlperf does not export",
}


def check_task(fw: Framework, task: str) -> None:
    """UnsupportedError with the reason for any task but `infer`."""
    if task != "infer":
        reason = TASK_REASONS.get(task, f"runs task infer only, not {task!r}")
        raise UnsupportedError(f"{fw.name} {reason}")


def check_precision(fw: Framework, precision: str, allowed: tuple[str, ...], why: str) -> None:
    """UnsupportedError naming the precisions this builder runs, and why, for any other."""
    if precision not in allowed:
        raise UnsupportedError(f"{fw.name} runs {' or '.join(allowed)} here, not {precision}: {why}")


def ort_session(fw: Framework, device: str, path: Path) -> Any:
    """The adapter's InferenceSession on `path` (its threads, providers and optimisation level)."""
    return fw.session(str(path), device)  # type: ignore[attr-defined]


def ort_runner(sess: Any) -> Callable[[np.ndarray], np.ndarray]:
    """x -> the model's first output, by ONNX Runtime."""
    name = sess.get_inputs()[0].name
    out = [sess.get_outputs()[0].name]

    def run(x: np.ndarray) -> np.ndarray:
        return sess.run(out, {name: x})[0]

    return run


def ov_compiled(fw: Framework, device: str, path: Path, precision: str) -> Any:
    """The adapter's CompiledModel of `path` at `precision`; UnsupportedError when this CPU's plugin lacks the
    precision, or when the compiled model does not run at the precision it was asked for."""
    ov_name = {"fp32": "FP32", "bf16": "BF16", "fp16": "FP16"}[precision]
    caps = list(fw.core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))  # type: ignore[attr-defined]
    if device == "cpu" and ov_name not in caps:
        raise UnsupportedError(f"openvino's CPU plugin has no {ov_name} on this CPU (capabilities: {', '.join(caps)})")
    compiled = fw.compile(str(path), device, precision)  # type: ignore[attr-defined]
    got = ov_precision(compiled)
    want = fw.compile_config(precision)["INFERENCE_PRECISION_HINT"]  # type: ignore[attr-defined]
    if got != want:
        raise UnsupportedError(f"openvino compiled the model at inference precision {got}, not {want}")
    return compiled


def ov_precision(compiled: Any) -> str:
    """The compiled model's INFERENCE_PRECISION_HINT in OpenVINO's short spelling (f32, bf16, f16)."""
    return str(compiled.get_property("INFERENCE_PRECISION_HINT").to_string())


def ov_runner(compiled: Any) -> Callable[[np.ndarray], np.ndarray]:
    """x -> the model's first output, by OpenVINO (one infer request, reused; outputs copied out of it)."""
    request = compiled.create_infer_request()

    def run(x: np.ndarray) -> np.ndarray:
        return request.infer({0: x})[0]

    return run


def inference_step(run: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> Step:
    """A Step over the built batch `x`: `fn` runs the whole batch and keeps its output, `result` is the last
    output as float64, `predict(n)` runs the first `n` samples (returning with the outputs on the host)."""
    batch = len(x)
    last: list[np.ndarray | None] = [None]

    def fn() -> np.ndarray:
        last[0] = run(x)
        return last[0]

    def result() -> np.ndarray:
        return np.array([]) if last[0] is None else np.asarray(last[0], dtype=np.float64)

    def predict(n: int) -> np.ndarray:
        if not 1 <= n <= batch:
            raise ValueError(f"predict takes 1..{batch} samples, not {n}")
        return run(x[:n])

    return Step(fn, result, predict=predict)
