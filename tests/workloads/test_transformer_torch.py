"""The transformer workload's PyTorch builder: its FLOPs against FlopCounterMode, training that trains, the
three tasks' Steps (generation's per-call phases), mixed precision on CPU, and on a GPU where there is one.

FlopCounterMode and attention on CPU (torch 2.13, read in torch/utils/flop_counter.py): formulas are registered
for the CUDA kernels of scaled_dot_product_attention (flash, efficient, cuDNN) and for bmm, not for the CPU fused
kernel `_scaled_dot_product_flash_attention_for_cpu`, which does not decompose either, so under the default CPU
backend the counter sees attention as 0 FLOPs. Under `sdpa_kernel(SDPBackend.MATH)` attention runs as two bmm's
(q k^T and the weighted sum of v, the full square, the causal mask not discounted) and is counted: there the
count equals `cost.py` exactly. The default-backend count is checked too, as cost.py minus its attention term.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from dlperf.frameworks import UnsupportedError, get_framework  # noqa: E402
from dlperf.models.transformer import get_config, init_weights, make_tokens, reference  # noqa: E402
from dlperf.workloads import get_workload  # noqa: E402
from tests.conftest import torch_counted_flops  # noqa: E402

W = get_workload("transformer")
FW = get_framework("torch")

TRAIN = {"model": "gpt2-tiny", "task": "train", "batch": 2, "seq_len": 16}
CASES = [
    TRAIN,
    TRAIN | {"task": "infer"},
    TRAIN | {"model": "bert-tiny"},
    TRAIN | {"model": "bert-tiny", "task": "infer"},
    {"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 8, "new_tokens": 5, "kv_cache": True},
    {"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 8, "new_tokens": 5, "kv_cache": False},
]


def build(**raw):
    return W.build(FW, "cpu", W.parse(raw))


def attention_flops(raw: dict) -> float:
    """cost.py's attention term of a case: 4 d per query-key pair per layer (x3 for a training step)."""
    p = W.parse(raw)
    cfg = p.config()
    if p.task == "generate":
        assert p.prompt_len is not None and p.new_tokens is not None
        pairs = p.prompt_len ** 2
        for j in range(1, p.new_tokens):
            ctx = p.prompt_len + j
            pairs += ctx if p.kv_cache else ctx * ctx
    else:
        assert p.seq_len is not None
        pairs = p.seq_len ** 2 * (3 if p.task == "train" else 1)
    return 4.0 * cfg.n_layer * cfg.d_model * pairs * p.batch


@pytest.mark.parametrize("raw", CASES, ids=lambda r: f"{r['model']}-{r['task']}-{r.get('kv_cache', '')}")
def test_flops_equal_the_counter(raw):
    step = build(**raw)
    want = W.cost(W.parse(raw)).flops
    with sdpa_kernel(SDPBackend.MATH):
        assert torch_counted_flops(step.fn) == want
    # the default CPU kernel of attention is invisible to the counter (see the module's docstring)
    assert torch_counted_flops(step.fn) == want - attention_flops(raw)


def test_adamw_on_a_fixed_batch_lowers_the_loss():
    step = build(**TRAIN, lr=1e-3)
    losses = []
    for _ in range(8):
        step.fn()
        losses.append(float(step.result()[0]))
    assert abs(losses[0] - math.log(512)) < 0.1  # random weights: about uniform over the 512 tokens at first
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[-1] < losses[0] - 0.5, losses


def test_encoder_training_lowers_the_loss():
    step = build(**TRAIN | {"model": "bert-tiny", "lr": 1e-3})
    losses = []
    for _ in range(6):
        step.fn()
        losses.append(float(step.result()[0]))
    assert losses[-1] < 0.5 * losses[0], losses


def test_first_loss_is_the_reference_cross_entropy():
    """The first loss is the reference model's mean next-token cross-entropy (the step trains what it says)."""
    step = build(**TRAIN)
    assert step.result().size == 0
    step.fn()
    cfg = get_config("gpt2-tiny")
    toks = make_tokens(cfg, 2, 17)
    logits = reference.forward(cfg, init_weights(cfg, 0), toks[:, :-1])
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    want = -np.take_along_axis(logp, toks[:, 1:, None], -1).mean()
    np.testing.assert_allclose(step.result(), [want], rtol=1e-5)
    assert step.result().dtype == np.float64


@pytest.mark.parametrize("name", ["gpt2-tiny", "bert-tiny"])
def test_infer_step_gives_the_reference_logits(name):
    step = build(model=name, task="infer", batch=2, seq_len=12)
    step.fn()
    cfg = get_config(name)
    want = reference.forward(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 12))
    got = step.result()
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("kv_cache", [True, False])
def test_generate_step_records_each_call(kv_cache):
    raw = {"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 6, "new_tokens": 4,
           "kv_cache": kv_cache}
    step = build(**raw)
    assert step.call_phases is not None and step.call_phases() == []
    for _ in range(3):
        step.fn()
    phases = step.call_phases()
    assert len(phases) == 3
    for ph in phases:
        assert set(ph) == {"ttft_s", "decode_s"} and ph["ttft_s"] > 0 and ph["decode_s"] > 0
    cfg = get_config("gpt2-tiny")
    want = reference.generate(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 6), 4)
    np.testing.assert_array_equal(step.result(), want.astype(np.float64))


def test_train_and_infer_steps_record_no_phases():
    assert build(**TRAIN).call_phases is None
    assert build(**TRAIN | {"task": "infer"}).call_phases is None


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_on_cpu(precision):
    """bf16 and fp16 autocast run on CPU: logits in the low dtype (close to fp32's, not equal), training trains."""
    fp32 = build(**TRAIN | {"task": "infer"})
    low = build(**TRAIN | {"task": "infer", "precision": precision})
    fp32.fn()
    out = low.fn()
    assert out.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a, b = fp32.result(), low.result()
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(b, a, atol=0.05 * np.abs(a).max())
    step = build(**TRAIN | {"precision": precision, "lr": 1e-3})
    losses = []
    for _ in range(4):
        step.fn()
        losses.append(float(step.result()[0]))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.2, losses
    gen = build(model="gpt2-tiny", task="generate", batch=1, prompt_len=4, new_tokens=3, precision=precision)
    gen.fn()
    assert gen.result().shape == (1, 3)


def test_low_precision_on_another_device_is_unsupported():
    with pytest.raises(UnsupportedError, match="not supported on meta"):
        W.build(FW, "meta", W.parse(TRAIN | {"precision": "bf16"}))


# -- on a GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_training_on_cuda(precision):
    step = W.build(FW, "cuda:0", W.parse(TRAIN | {"precision": precision, "lr": 1e-3, "batch": 4, "seq_len": 64}))
    losses = []
    for _ in range(6):
        step.fn()
        losses.append(float(step.result()[0]))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.3, losses


@pytest.mark.gpu
def test_cuda_fp32_logits_and_generation_equal_the_reference():
    """fp32 on CUDA runs with TF32 off, so the CPU tolerance holds."""
    cfg = get_config("gpt2-tiny")
    step = W.build(FW, "cuda:0", W.parse(TRAIN | {"task": "infer"}))
    step.fn()
    want = reference.forward(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 16))
    np.testing.assert_allclose(step.result(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    for kv_cache in (True, False):
        gen = W.build(FW, "cuda:0", W.parse({"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 8,
                                             "new_tokens": 5, "kv_cache": kv_cache}))
        gen.fn()
        assert len(gen.call_phases()) == 1
        want_tokens = reference.generate(cfg, init_weights(cfg, 0), make_tokens(cfg, 2, 8), 5)
        np.testing.assert_array_equal(gen.result(), want_tokens.astype(np.float64))


@pytest.mark.gpu
def test_sdpa_backends_are_selectable_on_cuda():
    """Each attention backend the GPU has runs the model's forward and backward in bf16 with the math backend's
    logits (bf16 tolerance). Flash and cuDNN need compute capability 8.0 or newer; below it they must refuse."""
    from dlperf.models.transformer import torch_model as tm

    cfg = get_config("gpt2-tiny")
    model = tm.build(cfg, device="cuda:0")
    x = torch.as_tensor(make_tokens(cfg, 2, 64), device="cuda:0")
    results = {}
    backends = [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION,
                SDPBackend.CUDNN_ATTENTION]
    needs_ampere = {SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION}
    modern = torch.cuda.get_device_capability() >= (8, 0)
    for backend in backends:
        model.zero_grad(set_to_none=True)
        try:
            with sdpa_kernel(backend), torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
                out.float().square().mean().backward()
        except RuntimeError:
            assert backend in needs_ampere and not modern, backend
            continue
        results[backend] = out.float().detach().cpu().numpy()
    base = results[SDPBackend.MATH]
    for backend, got in results.items():
        np.testing.assert_allclose(got, base, atol=0.05 * np.abs(base).max(), err_msg=str(backend))
