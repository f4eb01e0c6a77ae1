"""cnn `task: infer`: the eval-mode forward pass on torch, tensorflow and tensorflow-eager (logits on the host),
its cost against FlopCounterMode, torch's logits against the model's own eval forward, `Step.predict(n)` against
the full batch's first n rows, and the shipped `inference` study."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.models import build, get_spec, spec
from dlperf.workloads import get_workload
from tests.conftest import torch_counted_flops

W = get_workload("cnn")
FRAMEWORKS = ["torch", "tensorflow", "tensorflow-eager"]
#: LeNet-5 at its own size, AlexNet at a small image (a dropout net, so eval mode matters).
MODELS = [("lenet5", None), ("alexnet", 67)]


def infer(framework: str, model: str, size: int | None, batch: int = 4, **extra):
    fw = get_framework(framework)
    fw.seed(0)  # as the worker does: the weights' initial values are fixed
    p = W.parse({"model": model, "task": "infer", "batch": batch, "image_size": size, **extra})
    return p, W.build(fw, "cpu", p)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model,size", MODELS)
def test_infer_gives_finite_logits_of_the_batch(framework, model, size):
    p, step = infer(framework, model, size)
    step.fn()
    first = step.result()
    assert first.dtype == np.float64 and first.shape == (4, p.classes()) and np.isfinite(first).all()
    assert np.ptp(first, axis=1).min() > 0  # logits that differ between classes: a real forward pass
    step.fn()
    np.testing.assert_array_equal(step.result(), first)  # inference changes no weight (no dropout, no update)


@pytest.mark.parametrize("model,size", MODELS)
def test_torch_infer_equals_the_models_eval_forward(model, size):
    """Same weights (seed 0) and the same seeded inputs: the step's logits are the eval-mode model's."""
    import torch

    p, step = infer("torch", model, size)
    step.fn()
    torch.manual_seed(0)
    net = build(model, "torch", p.classes(), size).eval()
    side = p.size()
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(4, get_spec(model).in_channels, side, side, generator=gen)
    with torch.no_grad():
        want = net(x).double().numpy()
    np.testing.assert_allclose(step.result(), want, rtol=1e-6, atol=1e-7 * np.abs(want).max())
    with torch.no_grad():
        train_mode = net.train()(x).double().numpy()
    if model == "alexnet":  # dropout on in train mode: the step is not that
        assert not np.allclose(step.result(), train_mode)


@pytest.mark.parametrize("model,size", MODELS + [("googlenet", 64)])
def test_infer_cost_is_forward_flops_as_flop_counter_mode_counts(model, size):
    p, step = infer("torch", model, size, batch=3)
    assert W.cost(p).flops == spec.forward_flops(p.spec(), 3, size) and W.cost(p).samples == 3
    assert torch_counted_flops(step.fn) == W.cost(p).flops
    train = W.parse({"model": model, "batch": 3, "image_size": size})
    assert W.cost(train).flops > 2 * W.cost(p).flops  # a training step is forward + backward


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model,size", MODELS)
def test_predict_is_the_first_rows_of_the_full_batch(framework, model, size):
    _, step = infer(framework, model, size, batch=5)
    assert step.predict is not None
    step.fn()
    full = step.result()
    for n in (1, 2, 5, 2):  # a repeated n reuses its slice (and on tf.function its trace)
        got = np.asarray(step.predict(n), dtype=np.float64)
        assert got.shape == (n, full.shape[1])
        # a smaller batch may take another kernel (oneDNN): equal within float32 rounding, not bit for bit
        np.testing.assert_allclose(got, full[:n], rtol=1e-5, atol=1e-6 * np.abs(full).max())
    for bad in (0, 6, -1):
        with pytest.raises(ValueError, match="1 to 5"):
            step.predict(bad)


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_mixed_precision_inference_on_cpu_is_close_to_fp32(framework):
    """`amp` on a CPU: bfloat16 autocast (torch) or Keras' mixed_bfloat16 policy; float32 logits on the host
    within bfloat16's precision of the fp32 ones (same seeded weights and inputs)."""
    _, exact = infer(framework, "lenet5", None)
    _, amp = infer(framework, "lenet5", None, precision="amp")
    exact.fn()
    amp.fn()
    want, got = exact.result(), amp.result()
    assert not np.array_equal(got, want)  # it did run in bfloat16
    np.testing.assert_allclose(got, want, rtol=0, atol=0.05 * np.abs(want).max())
    assert np.asarray(amp.predict(2)).dtype == np.float32


def test_training_steps_cannot_be_served_and_caffe_refuses_inference():
    step = W.build(get_framework("torch"), "cpu", W.parse({"model": "lenet5", "batch": 2}))
    assert step.predict is None
    with pytest.raises(UnsupportedError, match="pycaffe is not installed"):
        W.build(get_framework("caffe"), "cpu", W.parse({"model": "lenet5", "batch": 2, "task": "infer"}))


# -- on a GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_torch_cuda_inference_matches_the_cpu_and_predict_lands_on_the_host(precision):
    """The weights are drawn on the CPU (seed 0) and moved: CUDA logits are the CPU's within TF32/fp16 rounding;
    predict's output is a float32 host tensor (the copy synced the device)."""
    import torch

    p = W.parse({"model": "alexnet", "task": "infer", "batch": 4, "image_size": 67, "precision": precision})
    fw = get_framework("torch")
    fw.seed(0)
    cpu = W.build(fw, "cpu", p.model_copy(update={"precision": "fp32"}))
    fw.seed(0)
    cuda = W.build(fw, "cuda:0", p)
    cpu.fn()
    cuda.fn()
    want = cpu.result()
    np.testing.assert_allclose(cuda.result(), want, rtol=0, atol=0.02 * np.abs(want).max())
    out = cuda.predict(2)
    assert out.device == torch.device("cpu") and out.dtype == torch.float32 and out.shape == (2, p.classes())
    np.testing.assert_allclose(out.double().numpy(), cuda.result()[:2], rtol=1e-2, atol=1e-3 * np.abs(want).max())


def test_the_optimizer_settings_belong_to_training():
    """lr and momentum default on a training step (its case key as before), and are refused on inference, so an
    inference case's key names no learning rate."""
    import pytest

    from dlperf.workloads import get_workload

    cnn = get_workload("cnn")
    train = cnn.parse({"model": "lenet5", "batch": 2})
    assert (train.lr, train.momentum) == (0.01, 0.9)
    infer = cnn.parse({"model": "lenet5", "batch": 2, "task": "infer"})
    assert infer.model_dump(exclude_none=True) == {"model": "lenet5", "task": "infer", "batch": 2, "precision": "fp32"}
    with pytest.raises(ValueError, match="lr applies to task train, not infer"):
        cnn.parse({"model": "lenet5", "batch": 2, "task": "infer", "lr": 0.1})
