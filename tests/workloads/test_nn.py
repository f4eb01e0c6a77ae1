"""dlperf.nn (study 003): every op, forward and backward, agrees across backends and with PyTorch autograd;
finite differences; the nets learn digits; the Device scope; the library stays small."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dlperf import nn
from dlperf.nn import operators as ops
from dlperf.nn.backends import sequential as seq
from dlperf.nn.backends import vectorized as vec
from dlperf.nn.data import digits

RTOL = 1e-8
rng = np.random.default_rng(42)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=1e-12)


def both(name, *args):
    """Run op `name` on both backends, check they agree, return the result."""
    out_s, out_v = getattr(seq, name)(*args), getattr(vec, name)(*args)
    if isinstance(out_v, tuple):
        for s, v in zip(out_s, out_v, strict=True):
            close(s, v)
    else:
        close(out_s, out_v)
    return out_v


def t(x, grad=False):
    return torch.tensor(x, dtype=torch.float64, requires_grad=grad)


@pytest.mark.parametrize("shape", [(3, 5), (1, 7), (4,)])
def test_elementwise_forward(shape):
    a, b = rng.standard_normal(shape), rng.standard_normal(shape) + 3.0
    close(both("add", a, b), t(a) + t(b))
    close(both("sub", a, b), t(a) - t(b))
    close(both("mul", a, b), t(a) * t(b))
    close(both("div", a, b), t(a) / t(b))
    close(both("exp", a), torch.exp(t(a)))
    close(both("log", b), torch.log(t(b)))
    close(both("maximum", a, 0.25), torch.clamp_min(t(a), 0.25))
    close(both("relu", a), torch.relu(t(a)))
    close(both("mul", a, 2.5), t(a) * 2.5)
    close(both("sub", 1.0, a), 1.0 - t(a))


def test_row_broadcast_matmul_transpose_sum():
    a, w, bias = rng.standard_normal((5, 3)), rng.standard_normal((3, 7)), rng.standard_normal(7)
    close(both("add", both("matmul", a, w), bias), t(a) @ t(w) + t(bias))
    close(both("transpose", a), t(a).T)
    x = rng.standard_normal((2, 3, 4, 5))
    close(both("sum", a, 0), t(a).sum(0))
    close(both("sum", a, 1), t(a).sum(1))
    close(both("sum", x, (0, 2, 3)), t(x).sum((0, 2, 3)))


def test_relu_grad_matches_autograd():
    a, g = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    ta = t(a, True)
    torch.relu(ta).backward(t(g))
    close(both("relu_grad", a, g), ta.grad)


@pytest.mark.parametrize(("n", "c", "h", "w", "k", "r", "stride", "pad"),
                         [(2, 3, 7, 5, 4, 3, 1, 1), (1, 2, 6, 6, 3, 2, 2, 0), (3, 1, 5, 7, 2, 3, 2, 1)])
def test_conv2d_forward_and_both_gradients(n, c, h, w, k, r, stride, pad):
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, r, r))
    tx, tw = t(x, True), t(wt, True)
    ref = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)
    out = both("conv2d", x, wt, stride, pad)
    close(out, ref.detach())
    g = rng.standard_normal(ref.shape)
    ref.backward(t(g))
    close(both("conv2d_grad_input", g, wt, x.shape, stride, pad), tx.grad)
    close(both("conv2d_grad_weight", g, x, wt.shape, stride, pad), tw.grad)


@pytest.mark.parametrize(("shape", "k", "stride"), [((2, 3, 6, 6), 2, 2), ((1, 2, 7, 5), 3, 2), ((2, 1, 5, 5), 2, 1)])
def test_maxpool_forward_and_gradient(shape, k, stride):
    x = rng.standard_normal(shape)
    tx = t(x, True)
    ref = torch.nn.functional.max_pool2d(tx, k, stride)
    out, arg = both("maxpool2d", x, k, stride)
    close(out, ref.detach())
    g = rng.standard_normal(ref.shape)
    ref.backward(t(g))
    close(both("maxpool2d_grad", g, arg, x.shape, k, stride), tx.grad)


def test_softmax_cross_entropy_and_gradient():
    logits, labels = rng.standard_normal((6, 10)), rng.integers(0, 10, 6)
    tl = t(logits, True)
    ref = torch.nn.functional.cross_entropy(tl, torch.tensor(labels))
    ref.backward()
    loss, grad = both("softmax_cross_entropy", logits, labels)
    assert abs(loss - ref.item()) <= RTOL * abs(ref.item())
    close(grad, tl.grad)


@pytest.mark.parametrize("mode", ["vectorized", "sequential"])
def test_finite_difference_gradients(mode):
    r = np.random.default_rng(3)
    model = nn.Sequential([nn.Conv2D(1, 2, 3, r, pad=1), nn.Tanh(), nn.MaxPool2D(2), nn.Flatten(),
                           nn.Dense(8, 5, r), nn.Sigmoid(), nn.Dense(5, 3, r)])
    x, y = r.standard_normal((2, 1, 4, 4)), np.array([0, 2])
    with ops.Device(mode):
        loss, grad = ops.softmax_cross_entropy(model.forward(x), y)
        model.backward(grad)
        for layer in (model.layers[0], model.layers[4], model.layers[6]):
            for name, p in layer.params.items():
                flat = p.reshape(-1)
                for i in r.choice(flat.size, size=min(4, flat.size), replace=False):
                    old = flat[i]
                    flat[i] = old + 1e-6
                    up = ops.softmax_cross_entropy(model.forward(x), y)[0]
                    flat[i] = old - 1e-6
                    down = ops.softmax_cross_entropy(model.forward(x), y)[0]
                    flat[i] = old
                    numeric = (up - down) / 2e-6
                    assert layer.grads[name].reshape(-1)[i] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


def test_digits_mlp_and_cnn_reach_95_percent():
    Xtr, Xte, ytr, yte = digits()
    with ops.Device("vectorized"):
        m = nn.mlp([64, 128, 10], seed=0)
        m.fit(Xtr, ytr, epochs=20, batch_size=32)
        assert m.evaluate(Xte, yte) >= 0.95
        Xtr, Xte, ytr, yte = digits(image=True)
        c = nn.cnn(seed=0)
        c.fit(Xtr, ytr, epochs=15, batch_size=32)
        assert c.evaluate(Xte, yte) >= 0.95


def test_sequential_reaches_the_same_accuracy_as_vectorized():
    Xtr, Xte, ytr, yte = digits(image=True)
    results = {}
    for mode in ("vectorized", "sequential"):
        with ops.Device(mode):
            model = nn.cnn(seed=1, channels=4)
            hist = model.fit(Xtr[:96], ytr[:96], epochs=1, batch_size=16)  # a reduced run
            results[mode] = (hist.loss, model.evaluate(Xte[:60], yte[:60]))
    np.testing.assert_allclose(results["sequential"][0], results["vectorized"][0], rtol=1e-9)
    assert results["sequential"][1] == results["vectorized"][1]


def test_device_scope_nests_and_restores_on_exceptions():
    ops.set_mode("vectorized")
    with ops.Device("sequential"):
        assert ops.get_mode() == "sequential"
        with pytest.raises(RuntimeError):
            with ops.Device("vectorized"):
                assert ops.get_mode() == "vectorized"
                raise RuntimeError("boom")
        assert ops.get_mode() == "sequential"
    assert ops.get_mode() == "vectorized"
    with pytest.raises(ValueError, match="unknown mode 'gpu'"):
        ops.set_mode("gpu")
    if not _gpu_with_cupy():
        with pytest.raises(ops.BackendUnavailable, match="the cuda backend (needs CuPy|found no)"):
            ops.set_mode("cuda")
    assert ops.get_mode() == "vectorized"


def _gpu_with_cupy() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def test_cuda_kernels_compile_with_nvcc(tmp_path):
    """Where nvcc exists (it does on the CI image), every kernel of the cuda backend must compile."""
    import shutil
    import subprocess

    from dlperf.nn.backends.cuda_kernels import KERNELS, SOURCE

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc (the CUDA toolkit) is not installed here")
    src = tmp_path / "kernels.cu"
    src.write_text(SOURCE)
    res = subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-o", str(tmp_path / "k.ptx"), str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for name in KERNELS:
        assert f".entry {name}(" in ptx


@pytest.mark.gpu
def test_cuda_backend_matches_vectorized_and_learns_digits():
    from dlperf.nn.backends import cuda

    r = np.random.default_rng(5)
    x, w = r.standard_normal((2, 3, 7, 5)), r.standard_normal((4, 3, 3, 3))
    a, b, row = r.standard_normal((33, 17)), r.standard_normal((17, 19)), r.standard_normal(17)
    g = r.standard_normal((2, 4, 4, 3))
    logits, labels = r.standard_normal((9, 10)), r.integers(0, 10, 9)
    checks = [("add", (a, row)), ("sub", (1.0, a)), ("mul", (a, a)), ("div", (a, 2.0)), ("maximum", (a, 0.1)),
              ("exp", (a,)), ("relu", (a,)), ("relu_grad", (a, a)), ("matmul", (a, b)), ("transpose", (a,)),
              ("sum", (x, (0, 2, 3))), ("conv2d", (x, w, 2, 1)), ("conv2d_grad_input", (g, w, x.shape, 2, 1)),
              ("conv2d_grad_weight", (g, x, w.shape, 2, 1))]
    for name, args in checks:
        close(cuda.to_numpy(getattr(cuda, name)(*args)), getattr(vec, name)(*args))
    out, arg = cuda.maxpool2d(x, 2, 2)
    vout, varg = vec.maxpool2d(x, 2, 2)
    close(cuda.to_numpy(out), vout)
    close(cuda.to_numpy(cuda.maxpool2d_grad(out, arg, x.shape, 2, 2)), vec.maxpool2d_grad(vout, varg, x.shape, 2, 2))
    loss, grad = cuda.softmax_cross_entropy(logits, labels)
    vloss, vgrad = vec.softmax_cross_entropy(logits, labels)
    assert loss == pytest.approx(vloss, rel=1e-10)
    close(cuda.to_numpy(grad), vgrad)
    cuda.MATMUL = "cublas"
    close(cuda.to_numpy(cuda.matmul(a, b)), a @ b)
    cuda.MATMUL = "tiled"
    Xtr, Xte, ytr, yte = digits(image=True)
    with ops.Device("cuda"):
        model = nn.cnn(seed=0)
        model.fit(Xtr, ytr, epochs=15, batch_size=32)
        assert model.evaluate(Xte, yte) >= 0.95


def test_library_stays_small():
    root = Path(nn.__file__).parent
    lines = sum(len(p.read_text().splitlines()) for p in root.rglob("*.py"))
    print(f"dlperf.nn: {lines} lines")
    assert lines < 2000


def test_nn_frameworks_one_per_backend():
    from dlperf.frameworks import UnsupportedError, get_framework

    for name, mode in (("nn-sequential", "sequential"), ("nn-vectorized", "vectorized")):
        fw = get_framework(name)
        assert fw.available() and fw.devices() == ["cpu"] and ops.get_mode() == mode
    if not _gpu_with_cupy():
        for name in ("nn-cuda", "nn-cuda-cublas"):
            with pytest.raises(UnsupportedError, match="the cuda backend (needs CuPy|found no)"):
                get_framework(name).devices()
    ops.set_mode("vectorized")


def test_backends_study_reports_matrix_epochs_and_profile(tmp_path):
    from tests.conftest import run_cli

    study = tmp_path / "b.yaml"
    study.write_text("name: backends_tiny\nworkload: backends\nframeworks: [nn-sequential, nn-vectorized, torch]\n"
                     "params: {model: mlp}\nprofile: true\nbudget_s: 0.3\nmin_run_time_s: 0.05\n")
    res = run_cli("run", str(study), db=tmp_path / "r.sqlite")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "speedup matrix" in out and "nn-sequential / nn-vectorized" in out
    assert "(43 steps x median)" in out and "nn-sequential was timed on" in out
    assert "cProfile of fit (mlp, nn-vectorized" in out and "dlperf/nn/model.py" in out
    matrix = out[out.index("speedup matrix"):]
    cells = next([c.strip() for c in line.split("│")[1:-1]] for line in matrix.splitlines() if line.startswith("│ mlp"))
    assert len(cells) == 8 and cells[2] == "-"  # 7 pairs; no cuda run here
    ratio = float(cells[1])
    assert ratio > 10  # pure Python is far slower than NumPy (the study saw 77x)


def test_backends_quick_study_matrix():
    from dlperf.studies import load_study

    s = load_study("backends", quick=True)
    combos = {(c.framework, c.device) for c in s.cases}
    assert combos == {("nn-sequential", "cpu"), ("nn-vectorized", "cpu"), ("torch", "cpu"), ("nn-cuda", "cuda"),
                      ("nn-cuda-cublas", "cuda")}
    assert s.settings.profile is True
