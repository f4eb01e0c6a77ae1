"""The transformer workload's JAX builder: its Steps run, train lowers the loss, generation records its phases."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import get_framework
from dlperf.models.transformer import init_weights, make_tokens, reference
from dlperf.workloads import get_workload

W = get_workload("transformer")


@pytest.fixture(scope="module")
def fw():
    return get_framework("jax")


def build(fw, device="cpu", **raw):
    return W.build(fw, device, W.parse(raw))


TRAIN = {"task": "train", "batch": 4, "seq_len": 16, "lr": 3e-3}


def _adamw_losses(fw, model: str, precision: str) -> tuple[object, list[float]]:
    """(the step, its 8 losses) of a train step run as the timer runs it: through the adapter's prepare/sync."""
    step = build(fw, model=model, precision=precision, **TRAIN)
    run, sync = fw.prepare(step.fn, "cpu")
    losses = [float(run()) for _ in range(8)]
    sync()
    return step, losses


@pytest.fixture(scope="module")
def gpt2_fp32(fw):
    """gpt2-tiny's fp32 train step, run once for the two tests that read it (each compiled it before): the loss
    falls, and its first loss is the reference's cross-entropy."""
    return _adamw_losses(fw, "gpt2-tiny", "fp32")


@pytest.mark.parametrize(("model", "precision"), [("gpt2-tiny", "fp32"), ("gpt2-tiny", "bf16"), ("gpt2-tiny", "fp16"),
                                                   ("bert-tiny", "fp32"), ("bert-tiny", "bf16")])
def test_adamw_steps_on_a_fixed_batch_lower_the_loss(fw, model, precision, request):
    if (model, precision) == ("gpt2-tiny", "fp32"):
        step, losses = request.getfixturevalue("gpt2_fp32")
    else:
        step, losses = _adamw_losses(fw, model, precision)
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0] - 0.05, losses
    assert step.result().tolist() == [losses[-1]]


def test_the_first_loss_is_the_cross_entropy_of_the_reference_logits(gpt2_fp32):
    """Decoder: inputs are tokens [:-1], targets [1:], mean over every position (float64 reference)."""
    _, losses = gpt2_fp32
    cfg = W.parse({"model": "gpt2-tiny", **TRAIN}).config()
    seq = make_tokens(cfg, TRAIN["batch"], TRAIN["seq_len"] + 1)
    logits = reference.forward(cfg, init_weights(cfg, 0), seq[:, :-1])
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    want = -np.take_along_axis(logp, seq[:, 1:, None], -1).mean()
    assert losses[0] == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize(("model", "shape"), [("gpt2-tiny", (2, 8, 512)), ("bert-tiny", (2, 2))])
def test_infer_returns_the_logits(fw, model, shape):
    p = W.parse({"model": model, "task": "infer", "batch": 2, "seq_len": 8})
    step = W.build(fw, "cpu", p)
    step.fn()
    cfg = p.config()
    out = step.result()
    assert out.dtype == np.float64 and out.shape == shape
    np.testing.assert_allclose(out, reference.forward(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 8)), atol=1e-5)


@pytest.mark.parametrize("kv_cache", [True, False])
def test_generate_records_each_calls_phases_and_the_reference_tokens(fw, kv_cache):
    p = W.parse({"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 6, "new_tokens": 5,
                 "kv_cache": kv_cache})
    step = W.build(fw, "cpu", p)
    assert step.call_phases is not None and step.call_phases() == []
    for _ in range(3):
        step.fn()
    phases = step.call_phases()
    assert len(phases) == 3
    for call in phases:
        assert set(call) == {"ttft_s", "decode_s"} and call["ttft_s"] > 0 and call["decode_s"] > 0
    assert phases[0]["ttft_s"] > phases[-1]["ttft_s"]  # the first call compiles
    cfg = p.config()
    want = reference.generate(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 6), 5)
    out = step.result()
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, want)


@pytest.mark.gpu
@pytest.mark.parametrize("raw", [
    {"model": "gpt2-tiny", "task": "train", "batch": 4, "seq_len": 16, "lr": 3e-3, "precision": "bf16"},
    {"model": "gpt2-tiny", "task": "train", "batch": 4, "seq_len": 16, "lr": 3e-3, "precision": "fp16"},
    {"model": "bert-tiny", "task": "train", "batch": 4, "seq_len": 16, "lr": 3e-3},
])
def test_training_on_the_gpu_lowers_the_loss(fw, raw):
    if "cuda:0" not in fw.devices():
        pytest.fail("a GPU is present but this jaxlib has no CUDA backend: pip install 'jax[cuda12]'")
    step = build(fw, "cuda:0", **raw)
    losses = [float(step.fn()) for _ in range(8)]
    assert losses[-1] < losses[0] - 0.05, losses


@pytest.mark.gpu
@pytest.mark.parametrize("kv_cache", [True, False])
def test_fp32_on_the_gpu_matches_the_reference(fw, kv_cache):
    """fp32 asks for Precision.HIGHEST (no TF32), so the GPU's logits and tokens match the CPU tolerance."""
    if "cuda:0" not in fw.devices():
        pytest.fail("a GPU is present but this jaxlib has no CUDA backend: pip install 'jax[cuda12]'")
    p = W.parse({"model": "gpt2-tiny", "task": "infer", "batch": 2, "seq_len": 8})
    step = W.build(fw, "cuda:0", p)
    step.fn()
    cfg = p.config()
    weights = init_weights(cfg, 0)
    np.testing.assert_allclose(step.result(), reference.forward(cfg, weights, make_tokens(cfg, 2, 8)), atol=1e-5)
    gen = build(fw, "cuda:0", model="gpt2-tiny", task="generate", batch=2, prompt_len=6, new_tokens=5,
                kv_cache=kv_cache)
    gen.fn()
    np.testing.assert_array_equal(gen.result(), reference.generate(cfg, weights, make_tokens(cfg, 2, 6), 5))


def test_fp16_skips_a_step_whose_scaled_gradient_overflows(fw, monkeypatch):
    """Loss scaling: with a scale far past float16's range every gradient is inf, so the params stay as they were
    (the same loss again) while the scale halves; the loss returned is unscaled."""
    from dlperf.workloads.transformer import jax_transformer

    monkeypatch.setattr(jax_transformer, "INIT_SCALE", 2.0**100)
    step = build(fw, model="gpt2-tiny", task="train", batch=2, seq_len=8, lr=3e-3, precision="fp16")
    losses = [float(step.fn()) for _ in range(3)]
    assert losses[0] == losses[1] == losses[2]
    assert 5.0 < losses[0] < 7.5  # about ln(512) = 6.24 for random weights, not 2**100 times it


def test_the_kv_cache_is_allocated_once_per_case_and_donated_to_each_call(fw, monkeypatch):
    """As torch's builder does: one cache made when the step is built; each call donates it to the prefill (the
    buffers it was given are consumed) and keeps the returned ones for the next call."""
    from dlperf.models.transformer import jax_model as J

    made = []
    real_new = J.new_cache
    monkeypatch.setattr(J, "new_cache", lambda *a: made.append(real_new(*a)) or made[-1])
    p = W.parse({"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 6, "new_tokens": 5})
    step = W.build(fw, "cpu", p)
    assert len(made) == 1  # before any timed call
    cfg = p.config()
    want = reference.generate(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 6), 5)
    for _ in range(3):
        given = made[0].buffers[0][0]
        step.fn()
        assert given.is_deleted() and not made[0].buffers[0][0].is_deleted()
        np.testing.assert_array_equal(step.result(), want)
    assert len(made) == 1
