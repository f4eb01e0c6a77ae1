"""The onnxruntime and openvino builders of cnn and transformer inference: they run the exported model on the
built batch, `predict(n)` is the first n rows of a full-batch run, the session really has the adapter's threads
(and OpenVINO's the stated precision), and what they cannot run ends `unsupported` with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.workloads import get_workload
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.cnn import onnxruntime_cnn, openvino_cnn
from dlperf.workloads.transformer import onnxruntime_transformer, openvino_transformer

RUNTIMES = ("onnxruntime", "openvino")
CASES = {
    "lenet5": ("cnn", {"model": "lenet5", "task": "infer", "batch": 5}),
    "gpt2-tiny": ("transformer", {"model": "gpt2-tiny", "task": "infer", "batch": 4, "seq_len": 12}),
    "bert-tiny": ("transformer", {"model": "bert-tiny", "task": "infer", "batch": 4, "seq_len": 12}),
}


def ov_precision(compiled) -> str:
    """The compiled model's INFERENCE_PRECISION_HINT in OpenVINO's short spelling (f32, bf16, f16)."""
    return str(compiled.get_property("INFERENCE_PRECISION_HINT").to_string())


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Every export of this file in one private cache, made in this process: the builders ask for an export in a
    child process (so that a runtime's worker never imports torch), and each child paid torch's and the exporter's
    imports again (about 5 s of CPU per file here). The same `export` writes the same file either way; its child
    process is tested in tests/models/test_onnx_export.py, and workers export in children in the CLI tests."""
    from dlperf.models import onnx_export

    root = tmp_path_factory.getbasetemp() / "runtime-builders-cache"
    monkeypatch.setenv("DLPERF_CACHE_DIR", str(root))
    real = onnx_export.export
    monkeypatch.setattr(onnx_export, "export", lambda request, *, isolated=False: real(request, isolated=False))


def _fw(name: str, threads: int = 2):
    fw = get_framework(name)
    fw.set_threads(threads)
    return fw


def _build(fw, case: str, **changes):
    workload, raw = CASES[case]
    w = get_workload(workload)
    return w.build(fw, "cpu", w.parse(raw | changes))


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_infer_runs_and_predict_is_the_first_rows(runtime, case):
    step = _build(_fw(runtime), case)
    assert step.result().size == 0  # nothing ran yet
    step.fn()
    full = step.result()
    batch = CASES[case][1]["batch"]
    assert full.dtype == np.float64 and full.shape[0] == batch and np.isfinite(full).all()
    for n in (1, 3, batch):
        part = step.predict(n)
        assert isinstance(part, np.ndarray) and part.shape == (n, *full.shape[1:])
        # the same rows through a smaller batch: fp32, where a kernel may block the batch differently
        np.testing.assert_allclose(part, full[:n], rtol=1e-5, atol=1e-5 * np.abs(full).max())
    for bad in (0, batch + 1):
        with pytest.raises(ValueError, match=rf"predict takes 1 to {batch} samples \(the built batch\)"):
            step.predict(bad)


@pytest.mark.parametrize("case", ["gpt2-tiny", "bert-tiny"])
def test_runtime_logits_are_the_torch_builders(case):
    """The same weights and tokens as the torch transformer builder: the same logits (fp32, other kernels)."""
    torch_step = _build(get_framework("torch"), case)
    torch_step.fn()
    want = torch_step.result()
    for runtime in RUNTIMES:
        step = _build(_fw(runtime), case)
        step.fn()
        np.testing.assert_allclose(step.result(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_training_and_generation_are_unsupported_with_the_reason(runtime):
    fw = _fw(runtime)
    with pytest.raises(UnsupportedError, match=f"{runtime} is an inference runtime: dlperf runs no training on it"):
        _build(fw, "lenet5", task="train")
    with pytest.raises(UnsupportedError, match=f"{runtime} is an inference runtime"):
        _build(fw, "bert-tiny", task="train")
    with pytest.raises(UnsupportedError, match="generation would need a graph with a KV cache per decode step"):
        w = get_workload("transformer")
        w.build(fw, "cpu", w.parse({"model": "gpt2-tiny", "task": "generate", "prompt_len": 4, "new_tokens": 2}))
    with pytest.raises(UnsupportedError, match=f"{runtime} runs fp32 here, not amp: amp is torch/TensorFlow autocast"):
        _build(fw, "lenet5", precision="amp")


def test_onnxruntime_runs_fp32_only():
    for precision in ("bf16", "fp16"):
        with pytest.raises(UnsupportedError, match=f"onnxruntime runs fp32 here, not {precision}: the exported "
                                                   "graph is float32"):
            _build(_fw("onnxruntime"), "gpt2-tiny", precision=precision)


@pytest.mark.parametrize("threads", [1, 2])
def test_onnxruntime_session_has_the_recorded_threads(threads):
    fw = _fw("onnxruntime", threads)
    w = get_workload("cnn")
    sess = onnxruntime_cnn.session(fw, "cpu", w.parse(CASES["lenet5"][1]))
    opts = sess.get_session_options()
    assert fw.threads() == threads and opts.intra_op_num_threads == threads and opts.inter_op_num_threads == 1
    assert sess.get_providers() == ["CPUExecutionProvider"]
    t = get_workload("transformer")
    sess = onnxruntime_transformer.session(fw, "cpu", t.parse(CASES["bert-tiny"][1]))
    assert sess.get_session_options().intra_op_num_threads == threads


@pytest.mark.parametrize("threads", [1, 2])
def test_openvino_compiled_model_has_f32_and_the_recorded_threads(threads):
    """OpenVINO's CPU plugin would run bf16 on this CPU by default: the builder's model is compiled at f32."""
    fw = _fw("openvino", threads)
    compiled = openvino_cnn.compiled(fw, "cpu", get_workload("cnn").parse(CASES["lenet5"][1]))
    assert ov_precision(compiled) == "f32"
    assert int(compiled.get_property("INFERENCE_NUM_THREADS")) == fw.threads() == threads
    t = get_workload("transformer")
    compiled = openvino_transformer.compiled(fw, "cpu", t.parse(CASES["gpt2-tiny"][1]))
    assert ov_precision(compiled) == "f32" and int(compiled.get_property("INFERENCE_NUM_THREADS")) == threads


def test_openvino_bf16_transformer_where_the_cpu_has_it():
    fw = _fw("openvino")
    caps = fw.core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    p = get_workload("transformer").parse(CASES["bert-tiny"][1] | {"precision": "bf16"})
    if "BF16" not in caps:
        with pytest.raises(UnsupportedError, match="openvino's CPU plugin has no BF16 on this CPU"):
            openvino_transformer.compiled(fw, "cpu", p)
        return
    assert ov_precision(openvino_transformer.compiled(fw, "cpu", p)) == "bf16"
    step = _build(fw, "bert-tiny", precision="bf16")
    step.fn()
    f32 = _build(fw, "bert-tiny")
    f32.fn()
    # bf16 keeps 8 bits of mantissa: the classifier's logits agree to about 1e-2 of their size, not to fp32's 1e-5
    np.testing.assert_allclose(step.result(), f32.result(), atol=0.05 * np.abs(f32.result()).max())


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_predict_returns_a_fresh_host_array_each_call(runtime):
    """The serving SUT keeps what predict returns: a later call must not rewrite it."""
    step = _build(_fw(runtime), "gpt2-tiny")
    first = step.predict(2)
    kept = first.copy()
    second = step.predict(2)
    assert isinstance(first, np.ndarray) and first.dtype == np.float32 and not np.shares_memory(first, second)
    first[...] = 0
    np.testing.assert_array_equal(step.predict(2), kept)
    np.testing.assert_array_equal(second, kept)


def test_onnxruntime_runs_through_an_iobinding_into_a_kept_output():
    """No feeds converted and no output allocated per call (`session.run` is never called); the logits stay
    where the forward wrote them (on the CPU torch's `.cpu()` copies nothing either)."""
    fw = _fw("onnxruntime")
    p = get_workload("cnn").parse(CASES["lenet5"][1])
    sess = onnxruntime_cnn.session(fw, "cpu", p)

    class NoRun:
        def __getattr__(self, name):
            if name == "run":
                raise AssertionError("session.run called")
            return getattr(sess, name)

    step = rs.ort_step(fw, NoRun(), "cpu", onnxruntime_cnn.inputs(p), copy_to_host=True)
    ptrs = {step.fn().get_outputs()[0].data_ptr() for _ in range(3)}
    assert len(ptrs) == 1
    assert step.result().shape == (5, 10) and step.predict(2).shape == (2, 10)


def test_openvino_models_are_compiled_with_static_shapes():
    fw = _fw("openvino")
    t = get_workload("transformer")
    shape = openvino_transformer.compiled(fw, "cpu", t.parse(CASES["gpt2-tiny"][1])).inputs[0].get_partial_shape()
    assert shape.is_static and shape.to_shape() == [4, 12]
    shape = openvino_cnn.compiled(fw, "cpu", get_workload("cnn").parse(CASES["lenet5"][1])).inputs[0]
    assert shape.get_partial_shape().to_shape() == [5, 1, 32, 32]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sequence_length_one_then_longer_gives_torchs_logits(runtime):
    """OpenVINO 2026.4 compiled with a dynamic sequence axis gives wrong bert-tiny logits (rel. error ~1e-1) on
    calls longer than a first call at length 1; compiled static per case it is right at both lengths."""
    for seq_len in (1, 16):
        torch_step = _build(get_framework("torch"), "bert-tiny", seq_len=seq_len)
        torch_step.fn()
        want = torch_step.result()
        step = _build(_fw(runtime), "bert-tiny", seq_len=seq_len)
        for n in (1, 4):
            np.testing.assert_allclose(step.predict(n), want[:n], rtol=1e-4, atol=1e-4 * np.abs(want).max())
        step.fn()
        np.testing.assert_allclose(step.result(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_openvino_model_builders_check_the_executed_precision(monkeypatch):
    """What each node ran at is read from the runtime model: an fp32 case computed in bf16 anywhere is refused."""
    from dlperf.frameworks import openvino_fw

    real = openvino_fw.executed_precisions
    assert {prec for _, _, prec in real(openvino_cnn.compiled(_fw("openvino"), "cpu",
                                                                get_workload("cnn").parse(CASES["lenet5"][1])))} \
        == {"f32"}
    monkeypatch.setattr(openvino_fw, "executed_precisions", lambda c: [*real(c), ("fc", "MatMul", "bf16")])
    for case in ("lenet5", "gpt2-tiny"):
        with pytest.raises(UnsupportedError, match=r"computes this float32 case in bf16 \(runtime model: MatMul "
                                                   r"in bf16\); refused"):
            _build(_fw("openvino"), case)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_cnn_weights_follow_the_case_seed(runtime):
    """torch's CNN builder draws its weights after `torch.manual_seed(seed)`: the runtimes export those."""
    import torch

    from dlperf.models import onnx_export

    fw = _fw(runtime)
    fw.seed(7)
    p = get_workload("cnn").parse(CASES["lenet5"][1])
    step = _build(fw, "lenet5")
    step.fn()
    with torch.no_grad():
        want = onnx_export.cnn_module("lenet5", seed=7)(torch.from_numpy(onnxruntime_cnn.inputs(p))).double().numpy()
    np.testing.assert_allclose(step.result(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    fw.seed(0)


# -- on a GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("case", ["lenet5", "gpt2-tiny"])
def test_onnxruntime_cuda_binds_on_the_device_and_copies_what_torch_copies(case):
    """On CUDA the inputs are device OrtValues bound once; the CNN's fn copies the logits to the host (torch's
    `.cpu()`), the transformer's leaves them on the device; predict returns host arrays; logits match the CPU's."""
    fw = _fw("onnxruntime")
    if "cuda:0" not in fw.devices():  # a CPU-only onnxruntime build on a GPU machine: said so, not run
        with pytest.raises(UnsupportedError, match="has no CUDAExecutionProvider"):
            onnxruntime_cnn.session(fw, "cuda:0", get_workload("cnn").parse(CASES["lenet5"][1]))
        return
    workload, raw = CASES[case]
    w = get_workload(workload)
    cpu, cuda = w.build(fw, "cpu", w.parse(raw)), w.build(fw, "cuda:0", w.parse(raw))
    cpu.fn()
    out = cuda.fn()
    assert isinstance(out, np.ndarray) == (workload == "cnn")
    if workload != "cnn":
        assert out.get_outputs()[0].device_name() == "cuda"
    want = cpu.result()
    np.testing.assert_allclose(cuda.result(), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    part = cuda.predict(2)
    assert isinstance(part, np.ndarray) and part.dtype == np.float32
    np.testing.assert_allclose(part, want[:2], rtol=1e-3, atol=1e-3 * np.abs(want).max())
