"""The cnn study (study 001): the models in PyTorch and TensorFlow compute the same function with the
published parameter counts; the cost model agrees with FlopCounterMode; the training step, the OOM
handling of sweeps and `maxbatch`, the kernel profiles and the report work end to end."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from dlperf.frameworks import get_framework
from dlperf.models import MODELS, build, get_spec, spec
from dlperf.models.caffe_prototxt import net_prototxt
from dlperf.models.tensorflow_models import copy_from_torch
from dlperf.profiling.kernels import by_family, family
from dlperf.profiling.tf_kernels import _self_times
from dlperf.workloads import get_workload
from tests.conftest import STUDIES, run_cli, torch_counted_flops

ALL = sorted(MODELS)
W = get_workload("cnn")


def _torch_params(net) -> int:
    return sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize("name", ALL)
def test_published_parameter_count_in_both_frameworks(name):
    s = get_spec(name, get_spec(name).published_params_classes)
    assert spec.param_count(s) == s.published_params
    assert _torch_params(build(name, "torch", s.num_classes)) == s.published_params
    assert build(name, "tensorflow", s.num_classes).count_params() == s.published_params
    assert f"{s.published_params:,}" in MODELS[name].__doc__  # the docstring names the count it follows


@pytest.mark.parametrize("name,size", [(n, None) for n in ALL] + [("alexnet", 67), ("googlenet", 45)])
def test_same_function_in_torch_and_tensorflow(name, size):
    """Weights copied from torch into Keras: logits agree within 1e-4 relative (fp32), at the full size and
    at odd reduced sizes (ceil-mode pooling and the flatten order are where they could part)."""
    import torch

    s = get_spec(name)
    torch.manual_seed(1)
    net = build(name, "torch", s.num_classes, size).eval()
    keras_model = build(name, "tensorflow", s.num_classes, size)
    copy_from_torch(s, keras_model, net, size)
    side = size or s.image_size
    x = np.random.default_rng(2).standard_normal((2, s.in_channels, side, side)).astype(np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    got = keras_model(x.transpose(0, 2, 3, 1), training=False).numpy()
    assert want.shape == got.shape == (2, s.num_classes)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_one_sgd_momentum_step_matches_torch():
    """Gradients and the optimiser: two training steps from the same weights land on the same logits."""
    import keras
    import tensorflow as tf
    import torch

    s = get_spec("lenet5")
    torch.manual_seed(3)
    net = build("lenet5", "torch")
    km = build("lenet5", "tensorflow")
    copy_from_torch(s, km, net)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 1, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 8)
    opt_t = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    opt_k = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    xt, yt, xk = torch.from_numpy(x), torch.from_numpy(y), tf.constant(x.transpose(0, 2, 3, 1))
    for _ in range(2):
        opt_t.zero_grad()
        torch.nn.functional.cross_entropy(net(xt), yt).backward()
        opt_t.step()
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, km(xk, training=True)))
        opt_k.apply_gradients(zip(tape.gradient(loss, km.trainable_variables), km.trainable_variables, strict=True))
    with torch.no_grad():
        want = net(xt).numpy()
    np.testing.assert_allclose(km(xk).numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("name,size", [("alexnet", 67), ("caffenet", 99), ("googlenet", 64), ("lenet5", None)])
def test_cost_model_against_flop_counter_mode(name, size):
    """Forward FLOPs equal FlopCounterMode's exactly. For a training step, FlopCounterMode counts a grouped
    convolution's weight gradient as if ungrouped (groups x too many); with that accounted for, exact too."""
    import torch

    s = get_spec(name)
    net = build(name, "torch", s.num_classes, size)
    side = size or s.image_size
    x = torch.randn(3, s.in_channels, side, side)
    with torch.no_grad():
        assert torch_counted_flops(lambda: net(x)) == spec.forward_flops(s, 3, size)
    p = W.parse({"model": name, "batch": 3, "image_size": size})
    step = W.build(get_framework("torch"), "cpu", p)
    counted = torch_counted_flops(step.fn)
    overcount = sum(2 * 3 * li.macs * (li.groups - 1) for li in spec.layers(s, size) if li.kind == "conv")
    assert counted == W.cost(p).flops + overcount
    assert (overcount > 0) == (name in ("alexnet", "caffenet"))


def test_published_forward_cost_of_alexnet_and_googlenet():
    # About 0.72 G multiply-adds for AlexNet at 227 and 1.5 G for GoogLeNet at 224, as commonly cited.
    assert spec.forward_flops(get_spec("alexnet"), 1) / 2 == pytest.approx(0.724e9, rel=0.01)
    assert spec.forward_flops(get_spec("googlenet"), 1) / 2 == pytest.approx(1.58e9, rel=0.01)


def _seeded(name: str):
    """The framework with its generators seeded, as the worker does before every case: the weights' initial
    values are then fixed, so whether one batch's loss falls far enough does not hang on a lucky draw
    (CI once drew TensorFlow weights whose loss fell only 10% in 40 steps)."""
    fw = get_framework(name)
    fw.seed(0)
    return fw


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "tensorflow-eager"])
def test_training_step_learns(framework):
    step = W.build(_seeded(framework), "cpu", W.parse({"model": "lenet5", "batch": 16, "lr": 0.05}))
    step.fn()
    first = float(step.result()[0])
    for _ in range(40):
        step.fn()
    assert float(step.result()[0]) < 0.8 * first  # one fixed batch: the loss must fall


def test_params_validation():
    with pytest.raises(ValueError, match="too small"):
        W.parse({"model": "alexnet", "batch": 1, "image_size": 20})
    with pytest.raises(ValueError):
        W.parse({"model": "vgg16", "batch": 1})
    with pytest.raises(ValueError):
        W.parse({"model": "alexnet", "batch": 0})
    assert W.parse({"model": "lenet5", "batch": 1}).classes() == 10
    assert W.parse({"model": "alexnet", "batch": 1}).size() == 227


def test_caffe_prototxt_and_absent_adapter():
    for name in ALL:
        text = net_prototxt(get_spec(name), 4)
        convs = [li for li in spec.layers(get_spec(name)) if li.kind == "conv"]
        assert text.count('type: "Convolution"') == len(convs)
        assert text.count("weight_filler") == len(convs) + text.count('type: "InnerProduct"')
        assert 'type: "SoftmaxWithLoss"' in text and "dim: 4" in text
    assert "group: 2" in net_prototxt(get_spec("alexnet"), 1)
    fw = get_framework("caffe")
    assert not fw.available() and "pycaffe" in fw.install_hint


def test_kernel_families():
    assert family("aten::mkldnn_convolution") == family("_MklNativeConv2DBackpropFilterWithBias") == "convolution"
    assert family("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32") == "convolution"
    assert family("aten::addmm") == family("_MklMatMul") == family("ampere_sgemm_128x64_nn") == "GEMM plain"
    assert family("BatchMatMulV2") == family("aten::bmm") == family("gemmSN_NN_kernel_batched") == "GEMM batched"
    assert family("Memcpy HtoD (Pageable -> Device)") == family("ConcatV2") == "memory copy"
    assert family("aten::relu_") == family("ResourceApplyKerasMomentum") == "element-wise"
    assert family("_MklNativeMaxPool") == family("LRNGrad") == "reduction"


def test_self_time_subtracts_nested_events():
    events = [(0, 100, "A"), (10, 30, "B"), (50, 20, "C"), (200, 5, "A")]
    got: dict[str, int] = {}
    for k, v in _self_times(events):
        got[k] = got.get(k, 0) + v
    assert got == {"A": 55, "B": 30, "C": 20}


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_kernel_profile_has_convolution_and_gemm(framework):
    fw = get_framework(framework)
    fw.import_module()
    step = W.build(fw, "cpu", W.parse({"model": "lenet5", "batch": 8}))
    fn, sync = fw.prepare(step.fn, "cpu")
    fn()
    rows = fw.kernel_profile(fn, sync, "cpu", steps=2)
    fams = by_family(rows)
    assert fams["convolution"]["calls"] >= 2 and fams["convolution"]["time_s"] > 0  # 2 convs forward per step
    assert fams["GEMM plain"]["calls"] >= 3 and fams["GEMM plain"]["time_s"] > 0  # 3 fully connected layers


def test_sweep_records_oom_and_skips_larger_batches(tmp_path):
    db = tmp_path / "r.sqlite"
    res = run_cli("run", str(_study("cnn_oom.yaml")), db=db, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = {json.loads(p)["batch"]: (s, r, w) for p, s, r, w in sqlite3.connect(db).execute(
        "select params, status, reason, wall_s from results")}
    assert rows[256][0] == "ok"
    assert rows[16384][0] == "oom" and rows[16384][2] > 0  # it ran, and ran out of memory under the cap
    assert rows[32768][0] == "oom" and rows[32768][2] == 0 and "not run" in rows[32768][1]
    assert "first out-of-memory batch" in res.stdout and "16384" in res.stdout


def test_maxbatch_finds_the_boundary_under_a_cap(tmp_path):
    db = tmp_path / "r.sqlite"
    res = run_cli("maxbatch", "lenet5", "--mem-limit", "600MiB", "--start", "2048", "--steps", "1",
                  "--plot-dir", str(tmp_path / "plots"), db=db, timeout=400)
    assert res.returncode == 0, res.stderr
    statuses = dict(sqlite3.connect(db).execute("select json_extract(params, '$.batch'), status from results"))
    ok = [b for b, s in statuses.items() if s == "ok"]
    oom = [b for b, s in statuses.items() if s == "oom"]
    assert ok and oom and max(ok) < min(oom)
    assert min(oom) - max(ok) <= max(1, max(ok) // 32)
    assert f"largest batch that fits under a 600 MiB cap: {max(ok)}" in res.stdout
    assert (tmp_path / "plots" / "maxbatch-memory.png").stat().st_size > 0


def test_maxbatch_bad_input_is_one_line(tmp_path):
    res = run_cli("maxbatch", "alexnet", "--image-size", "8", db=tmp_path / "r.sqlite")
    assert res.returncode != 0 and "too small" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = run_cli("maxbatch", "alexnet", "--mem-limit", "lots", db=tmp_path / "r.sqlite")
    assert res.returncode == 2 and "not a memory size" in res.stderr


def test_cnn_report_with_kernel_table_and_plot(tmp_path):
    db = tmp_path / "r.sqlite"
    res = run_cli("run", str(_study("cnn_tiny.yaml")), db=db, timeout=400)
    assert res.returncode == 0, res.stderr
    assert "kernel families per training step" in res.stdout
    for fam in ("convolution", "GEMM plain"):
        assert fam in res.stdout
    res = run_cli("report", "latest", "--format", "markdown", "--plot-dir", str(tmp_path / "p"), db=db)
    assert res.returncode == 0, res.stderr
    assert "## Largest batch" in res.stdout and "seconds per image" in res.stdout
    assert (tmp_path / "p" / "cnn-time-per-image.png").stat().st_size > 0


def test_quick_study_matrix():
    from dlperf.studies import load_study

    quick = load_study("cnn", quick=True)
    assert {c.framework for c in quick.cases} == {"torch", "tensorflow"}
    assert sorted({c.params["batch"] for c in quick.cases}) == [1, 2, 4, 8, 16, 32]
    full = load_study("cnn")
    assert sorted({c.params["batch"] for c in full.cases}) == [2**i for i in range(10)]
    assert {"alexnet", "googlenet"} <= {c.params["model"] for c in full.cases}


def _study(name: str):

    return STUDIES / name


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_mixed_precision_step_on_cpu(framework):
    """`amp` on a CPU autocasts to bfloat16; the step trains and its loss stays finite."""
    step = W.build(_seeded(framework), "cpu", W.parse({"model": "lenet5", "batch": 8, "precision": "amp",
                                                              "lr": 0.05}))
    step.fn()
    first = float(step.result()[0])
    for _ in range(20):
        step.fn()
    last = float(step.result()[0])
    assert np.isfinite(last) and last < first
