"""What the ONNX Runtime and OpenVINO builders of the cnn and transformer workloads share.

Both runtimes serve a model exported once from PyTorch (`models.onnx_export`, in a child process, so a runtime's
worker never imports torch), with the weights torch's builder uses (`export_seed`). They run inference only: a
training step, or generation (which would need a graph with a KV cache per decode step; only the logits forward
is exported), ends `unsupported` with the reason.

What a timed call (`fn`) does, against torch's infer step. Torch's step runs the forward into a freshly allocated
logits tensor; the CNN's then copies the logits to the host (`.cpu()`: a no-op on the CPU, a device-to-host copy
on CUDA); the transformer's leaves them where they are. Here the inputs are made once, before timing, and bound
once on the run's device (ONNX Runtime: an IOBinding with the inputs as OrtValues on the device; OpenVINO: the
request's input tensor shares the NumPy array's memory), and the output is bound on the device too. A call is
the runtime's forward writing into an output it keeps (allocated by the first call, rewritten by the next), plus,
where torch's step copies (the CNN on a device other than the CPU), the copy of the logits to a fresh host array.
So the forward and the copies are the same work as torch's; the one difference is the allocation of the logits,
which torch makes per call and these runtimes once. Neither runtime copies inputs or outputs per call (ONNX
Runtime's `run(feeds)` would wrap the feeds and allocate the outputs, on CUDA also copy both; OpenVINO's
`infer({0: x})` would copy the input into the request and the output out of it). Both return with the outputs
computed (ONNX Runtime synchronizes the CUDA stream at the end of every run, its default), so nothing needs a sync.

`predict(n)` runs the first n samples (inputs bound once per n used, kept) and returns a fresh float32 host
array the caller may keep: on a device the copy torch's predict makes, on the CPU a copy of the kept output
(torch's predict returns its fresh tensor there; the copy is of the logits only).

OpenVINO compiles with static shapes: the timed model at the built (batch, seq_len) / (batch, C, H, W), which is
faster than dynamic shapes (gpt2-tiny 1x64: 0.20 ms static, 0.24 ms with the batch dynamic, lenet5 batch 1:
0.037 against 0.049 ms) and avoids OpenVINO 2026.4's wrong outputs when a compiled bert-tiny first runs at
sequence length 1 and later at a longer one. `predict(batch)` uses that model; `predict(n)` for a smaller n a
second one with only the batch axis dynamic, compiled at the first such call (a serving run calls predict(1)
before LoadGen starts), not one model per n: a Server run may ask for every n up to the batch. Every compiled
model's executed node precisions are checked against the case's (`openvino_fw.check_executed_precision`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step, check_predict_n

#: Why a task other than infer is not run on an inference runtime.
TASK_REASONS = {
    "train": "is an inference runtime: dlperf runs no training on it (the exported ONNX graph is the forward "
             "pass only)",
    "generate": "runs the exported logits forward only: generation would need a graph with a KV cache per decode "
                "step, which dlperf does not export",
}
#: dlperf precision -> the dtype an OpenVINO model's executed nodes must keep.
OV_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def check_task(fw: Framework, task: str) -> None:
    """UnsupportedError with the reason for any task but `infer`."""
    if task != "infer":
        reason = TASK_REASONS.get(task, f"runs task infer only, not {task!r}")
        raise UnsupportedError(f"{fw.name} {reason}")


def check_precision(fw: Framework, precision: str, allowed: tuple[str, ...], why: str) -> None:
    """UnsupportedError naming the precisions this builder runs, and why, for any other."""
    if precision not in allowed:
        raise UnsupportedError(f"{fw.name} runs {' or '.join(allowed)} here, not {precision}: {why}")


def export_seed(fw: Framework) -> int:
    """The seed the case gave the adapter (`fw.seed(n)`; 0 where none was given): the CNN builders export the
    torch weights this seed gives, as torch's builder draws its CNN after `torch.manual_seed(n)`."""
    value = fw.seed_value()
    return 0 if value is None else int(value)


def ort_session(fw: Framework, device: str, path: Path) -> Any:
    """The adapter's InferenceSession on `path` (its threads, providers and optimisation level)."""
    return fw.session(str(path), device)  # type: ignore[attr-defined]


def ort_step(fw: Framework, sess: Any, device: str, x: np.ndarray, *, copy_to_host: bool) -> Step:
    """A Step running `sess` on the built batch `x` through IOBindings (inputs bound once per n on `device`,
    outputs bound on `device`); `copy_to_host`: `fn` also copies the logits to the host where `device` is not the
    CPU (what torch's CNN step does)."""
    ort = fw.import_module()
    kind, _, index = device.partition(":")
    dev_id = int(index or 0)
    in_name, out_name = sess.get_inputs()[0].name, sess.get_outputs()[0].name
    batch = len(x)
    inputs: dict[int, Any] = {}  # n -> x[:n] as an OrtValue on the device (on the CPU: reading x in place)

    def binding(n: int) -> Any:
        if n not in inputs:
            inputs[n] = ort.OrtValue.ortvalue_from_numpy(x[:n], kind, dev_id)
        b = sess.io_binding()
        b.bind_ortvalue_input(in_name, inputs[n])
        b.bind_output(out_name, kind, dev_id)
        b.synchronize_inputs()
        return b

    timed = binding(batch)
    predicts: dict[int, Any] = {}
    copy = copy_to_host and kind != "cpu"
    last: list[Any] = [None]

    def fn(_x: np.ndarray = x) -> Any:  # the CPU OrtValues read x in place: kept alive here
        sess.run_with_iobinding(timed)
        last[0] = timed.copy_outputs_to_cpu()[0] if copy else timed
        return last[0]

    def result() -> np.ndarray:
        if last[0] is None:
            return np.array([])
        out = last[0] if copy else timed.get_outputs()[0].numpy()
        return np.array(out, dtype=np.float64)

    def predict(n: int) -> np.ndarray:
        n = check_predict_n(n, batch)
        if n not in predicts:
            predicts[n] = binding(n)
        sess.run_with_iobinding(predicts[n])
        return np.asarray(predicts[n].copy_outputs_to_cpu()[0])

    return Step(fn, result, predict=predict)


def ov_compiled(fw: Framework, device: str, path: Path, precision: str, shape: list[int] | None = None) -> Any:
    """The adapter's CompiledModel of `path` at `precision`, its first input fixed at `shape` (-1: dynamic);
    UnsupportedError when this CPU's plugin lacks the precision, or when a node of the compiled model computes
    below it (read from the runtime model, not the hint)."""
    from dlperf.frameworks.openvino_fw import check_executed_precision

    ov_name = {"fp32": "FP32", "bf16": "BF16", "fp16": "FP16"}[precision]
    caps = list(fw.core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))  # type: ignore[attr-defined]
    if device == "cpu" and ov_name not in caps:
        raise UnsupportedError(f"openvino's CPU plugin has no {ov_name} on this CPU (capabilities: {', '.join(caps)})")
    compiled = fw.compile(str(path), device, precision, shape)  # type: ignore[attr-defined]
    check_executed_precision(compiled, OV_DTYPES[precision], fw.version or fw.import_module().get_version())
    return compiled


def ov_step(fw: Framework, device: str, path: Path, precision: str, x: np.ndarray) -> Step:
    """A Step running the model at `path` on the built batch `x` by OpenVINO: `fn` on a model compiled at x's
    static shape; `predict(n)` on it for n = batch, else on a model with the batch axis dynamic."""
    ov = fw.import_module()
    batch = len(x)
    static = ov_compiled(fw, device, path, precision, list(x.shape))
    dynamic: list[Any] = []
    requests: dict[int, Any] = {}

    def request(model: Any, n: int) -> Any:
        r = model.create_infer_request()
        r.set_input_tensor(ov.Tensor(x[:n], shared_memory=True))  # reads x in place: x lives with the step
        return r

    timed = request(static, batch)
    ran = [False]

    def fn(_x: np.ndarray = x) -> Any:
        ran[0] = True
        return timed.infer(share_outputs=True)  # into the request's kept output: no copy in or out

    def result() -> np.ndarray:
        return np.array(timed.get_output_tensor(0).data, dtype=np.float64) if ran[0] else np.array([])

    def predict(n: int) -> np.ndarray:
        n = check_predict_n(n, batch)
        if n not in requests:
            if n != batch and not dynamic:
                dynamic.append(ov_compiled(fw, device, path, precision, [-1, *x.shape[1:]]))
            requests[n] = request(static if n == batch else dynamic[0], n)
        r = requests[n]
        r.infer(share_outputs=True)
        return np.array(r.get_output_tensor(0).data)  # a fresh host array (the request's is rewritten next call)

    return Step(fn, result, predict=predict)
