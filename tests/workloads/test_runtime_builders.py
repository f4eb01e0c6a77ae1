"""The onnxruntime and openvino builders of cnn and transformer inference: they run the exported model on the
built batch, `predict(n)` is the first n rows of a full-batch run, the session really has the adapter's threads
(and OpenVINO's the stated precision), and what they cannot run ends `unsupported` with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.workloads import get_workload
from dlperf.workloads.cnn import onnxruntime_cnn, openvino_cnn
from dlperf.workloads.runtime_steps import ov_precision
from dlperf.workloads.transformer import onnxruntime_transformer, openvino_transformer

RUNTIMES = ("onnxruntime", "openvino")
CASES = {
    "lenet5": ("cnn", {"model": "lenet5", "task": "infer", "batch": 5}),
    "gpt2-tiny": ("transformer", {"model": "gpt2-tiny", "task": "infer", "batch": 4, "seq_len": 12}),
    "bert-tiny": ("transformer", {"model": "bert-tiny", "task": "infer", "batch": 4, "seq_len": 12}),
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Every export of this file in one private cache (the builders export in a child process, which inherits it)."""
    root = tmp_path_factory.getbasetemp() / "runtime-builders-cache"
    monkeypatch.setenv("DLPERF_CACHE_DIR", str(root))


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
        with pytest.raises(ValueError, match=f"predict takes 1..{batch} samples"):
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
