"""The transformer workload's Keras builder on `tensorflow` (tf.function) and `tensorflow-eager`: each task's
step runs and computes what the reference does; generation records one phase split per call; AdamW learns."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.models.transformer import get_config, init_weights, make_tokens, reference
from dlperf.workloads import get_workload
from dlperf.workloads.transformer import tensorflow_transformer as tt

W = get_workload("transformer")
FRAMEWORKS = ["tensorflow", "tensorflow-eager"]


def reference_loss(batch: int, seq_len: int) -> float:
    """gpt2-tiny's mean next-token cross-entropy on the builder's tokens, in float64."""
    cfg = get_config("gpt2-tiny")
    tokens = make_tokens(cfg, batch, seq_len + 1)
    logits = reference.forward(cfg, init_weights(cfg, 0), tokens[:, :-1])
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, tokens[:, 1:, None], -1).mean())


def build(framework: str, device: str = "cpu", **raw):
    return W.build(get_framework(framework), device, W.parse(raw))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model", ["gpt2-tiny", "bert-tiny"])
def test_infer_returns_the_reference_logits(framework, model):
    step = build(framework, model=model, task="infer", batch=2, seq_len=12)
    step.fn()
    cfg = get_config(model)
    want = reference.forward(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 12))
    got = step.result()
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())  # float32 vs float64


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model", ["gpt2-tiny", "bert-tiny"])
def test_adamw_steps_on_a_fixed_batch_lower_the_loss(framework, model):
    step = build(framework, model=model, task="train", batch=4, seq_len=16, lr=1e-3)
    losses = []
    for _ in range(5):
        step.fn()
        losses.append(float(step.result()[0]))
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    if model == "gpt2-tiny":  # the first loss is the reference's
        assert math.isclose(losses[0], reference_loss(4, 16), rel_tol=1e-5)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("kv_cache", [True, False], ids=["kv", "no-cache"])
def test_generate_records_each_call_and_equals_the_reference(framework, kv_cache):
    step = build(framework, model="gpt2-tiny", task="generate", batch=2, prompt_len=6, new_tokens=5,
                 kv_cache=kv_cache)
    assert step.call_phases is not None and step.call_phases() == []
    for _ in range(3):
        step.fn()
    phases = step.call_phases()
    assert len(phases) == 3
    assert all(set(p) == {"ttft_s", "decode_s"} and p["ttft_s"] > 0 and p["decode_s"] > 0 for p in phases)
    cfg = get_config("gpt2-tiny")
    want = reference.generate(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 6), 5)
    np.testing.assert_array_equal(step.result(), want.astype(np.float64))


@pytest.mark.parametrize(("framework", "precision"), [("tensorflow", "bf16"), ("tensorflow-eager", "fp16")])
def test_mixed_precision_trains_on_the_cpu(framework, precision):
    """bf16, and fp16 with loss scaling, run (one mode each: the mode does not change the policy); the first
    loss is the reference's within the low dtype's rounding, and the step after it lowers it."""
    step = build(framework, model="gpt2-tiny", task="train", batch=2, seq_len=8, precision=precision, lr=1e-3)
    step.fn()
    first = float(step.result()[0])
    step.fn()
    assert math.isclose(first, reference_loss(2, 8), rel_tol=1e-2)
    assert float(step.result()[0]) < first
    import keras

    assert keras.config.dtype_policy().name == "float32"  # the policy was this model's, not the process's


def test_bf16_on_a_gpu_older_than_ampere_is_unsupported():
    details = {"compute_capability": (7, 5)}
    fake_tf = SimpleNamespace(config=SimpleNamespace(
        list_physical_devices=lambda kind: ["GPU:0"],
        experimental=SimpleNamespace(get_device_details=lambda gpu: details)))
    with pytest.raises(UnsupportedError, match="compute capability 8.0 or more .* cuda:0 has 7.5"):
        tt.check_precision(fake_tf, "cuda:0", "bf16")
    tt.check_precision(fake_tf, "cuda:0", "fp16")
    tt.check_precision(fake_tf, "cpu", "bf16")
    details["compute_capability"] = (8, 0)
    tt.check_precision(fake_tf, "cuda:0", "bf16")


# -- on a GPU ----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_on_the_gpu(framework):
    """fp32 with TensorFloat-32 switched off matches the reference as on the CPU; generation equals it; bf16
    and fp16 train."""
    fw = get_framework(framework)
    if not fw.available() or "cuda:0" not in fw.devices():
        pytest.fail("a GPU is present but TensorFlow does not see it: install tensorflow[and-cuda]")
    step = build(framework, "cuda:0", model="gpt2-tiny", task="infer", batch=2, seq_len=12)
    step.fn()
    cfg = get_config("gpt2-tiny")
    want = reference.forward(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 12))
    np.testing.assert_allclose(step.result(), want, rtol=0, atol=1e-5 * np.abs(want).max())
    for kv_cache in (True, False):
        gen = build(framework, "cuda:0", model="gpt2-tiny", task="generate", batch=2, prompt_len=6, new_tokens=5,
                    kv_cache=kv_cache)
        gen.fn()
        np.testing.assert_array_equal(gen.result(), reference.generate(cfg, init_weights(cfg, 0),
                                                                       make_tokens(cfg, 2, 6), 5))
    for precision in ("bf16", "fp16"):
        train = build(framework, "cuda:0", model="gpt2-tiny", task="train", batch=2, seq_len=8, precision=precision)
        train.fn()
        assert np.isfinite(train.result()).all()
