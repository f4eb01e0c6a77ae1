"""dtype is never lost: the arrays a builder makes are in the case's dtype (their bytes are the bytes the cost
model counts, and those are what is stored), dlperf.nn keeps float32 end to end, a dtype a backend cannot do is
`unsupported`, and a study that mixes dtypes shows every case in every table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dlperf import nn
from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.nn import operators as ops
from dlperf.nn.backends import cuda as nn_cuda
from dlperf.nn.backends import sequential as seq
from dlperf.nn.backends import vectorized as vec
from dlperf.workloads import get_workload
from dlperf.workloads.base import Step
from dlperf.workloads.ops import spec
from tests.conftest import run_cli

W = get_workload("ops")
CPU_FRAMEWORKS = ["numpy", "torch", "tensorflow", "tensorflow-eager", "jax", "pytensor", "nn-vectorized",
                  "nn-sequential", "onnxruntime", "openvino"]
#: Where each framework stands on bfloat16 (float32 and float64 every framework here must do, but for DTYPE_GAPS).
HAS_BFLOAT16 = {"torch", "tensorflow", "tensorflow-eager", "jax", "onnxruntime", "openvino"}
#: (framework, dtype) -> the ops an inference runtime has no kernel for in that dtype, or computes below it (each
#: refused with the runtime's own reason: tests/workloads/test_ops_runtimes.py).
DTYPE_GAPS = {("onnxruntime", "bfloat16"): set(spec.OPS) - {"layernorm"}, ("onnxruntime", "float64"): {"conv2d"},
              ("openvino", "float64"): set(spec.OPS)}
#: (framework, op) that are unsupported in any dtype, each with the reason its builder gives (see test_ops).
OP_GAPS = {("pytensor", "conv2d"), ("nn-vectorized", "softmax"), ("nn-sequential", "softmax")}


def _params(op: str, dtype: str, size_mb: float = 0.05):
    return W.parse({"op": op, "size_mb": size_mb, "dtype": dtype})


def test_every_installed_framework_is_covered():
    installed = {name for name in W.frameworks() if get_framework(name).available()}
    gpu_only = {"nn-cuda", "nn-cuda-cublas", "cupy"}  # their builders are those of nn and numpy, tested here
    # the same builders and arrays as tensorflow and jax in another compile mode (tests/adapters/test_compiler_modes)
    modes = {"tensorflow-xla", "jax-nojit"}
    assert installed - gpu_only - modes <= set(CPU_FRAMEWORKS), installed


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("framework", CPU_FRAMEWORKS)
def test_built_arrays_hold_the_bytes_the_cost_model_counts(framework, dtype):
    fw = get_framework(framework)
    if not fw.available():
        pytest.fail(f"{framework} is part of this project's CPU matrix but is not installed here")
    for op in spec.OPS:
        p = _params(op, dtype)
        try:
            step = W.build(fw, "cpu", p)
        except UnsupportedError as exc:
            assert ((framework, op) in OP_GAPS or op in DTYPE_GAPS.get((framework, dtype), ())
                    or (dtype == "bfloat16" and framework not in HAS_BFLOAT16)), exc
            assert str(exc)  # the reason is stated
            continue
        assert dtype != "bfloat16" or framework in HAS_BFLOAT16, f"{framework} ran bfloat16: update HAS_BFLOAT16"
        assert op not in DTYPE_GAPS.get((framework, dtype), ()), f"{framework} ran {op} in {dtype}: update DTYPE_GAPS"
        step.fn()
        arrays = step.array_nbytes()
        model = W.cost(p)
        assert sum(arrays.values()) == model.bytes_moved, (op, arrays)
        stored = W.built_cost(p, step)  # what the worker stores
        assert stored.bytes_moved == model.bytes_moved and stored.flops == model.flops
        item = spec.ITEMSIZE[dtype]
        assert all(n % item == 0 for n in arrays.values())


def test_a_builder_that_casts_silently_ends_in_an_error():
    p = _params("add", "float32")
    n = W.shape(p)["n"]
    widened = Step(lambda: None, array_nbytes=lambda: {"a": 8 * n, "b": 8 * n, "out": 8 * n})
    with pytest.raises(RuntimeError, match="did not keep float32"):
        W.built_cost(p, widened)
    assert W.built_cost(p, Step(lambda: None)) == W.cost(p)  # a builder that reports nothing: the model's


@pytest.mark.parametrize("framework", ["nn-vectorized", "nn-sequential"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nn_ops_build_and_return_the_requested_dtype(framework, dtype):
    fw = get_framework(framework)
    for op in spec.OPS:
        if (framework, op) in OP_GAPS:
            continue
        step = W.build(fw, "cpu", _params(op, dtype))
        out = step.fn()
        assert out.dtype == np.dtype(dtype), (op, out.dtype)
        ref = spec.reference(op, spec.make_inputs(op, W.shape(_params(op, dtype))))
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(step.result(), ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))
    ops.set_mode("vectorized")


@pytest.mark.parametrize("framework", ["nn-vectorized", "nn-sequential"])
def test_nn_refuses_a_dtype_it_cannot_do(framework):
    with pytest.raises(UnsupportedError, match=f"{framework} computes in float32/float64 only, not float16"):
        W.build(get_framework(framework), "cpu", _params("add", "float16"))
    ops.set_mode("vectorized")


def test_nn_cuda_is_float64_only_and_says_so():
    assert nn_cuda.DTYPES == ("float64",)
    with pytest.raises(TypeError, match="float64 only, not float32"):
        nn_cuda.asarray(np.zeros(3, dtype=np.float32))  # refused before CuPy is touched: no silent widening


@pytest.mark.parametrize("backend", [seq, vec], ids=["sequential", "vectorized"])
def test_every_primitive_keeps_float32(backend):
    r = np.random.default_rng(3)
    f = np.float32
    a, b, row = r.standard_normal((4, 5)).astype(f), r.standard_normal((5, 3)).astype(f), r.standard_normal(5).astype(f)
    x, w = r.standard_normal((2, 2, 4, 4)).astype(f), r.standard_normal((3, 2, 3, 3)).astype(f)
    g = r.standard_normal((2, 3, 4, 4)).astype(f)
    outs = {
        "asarray": backend.asarray(a), "add": backend.add(a, row), "sub": backend.sub(1.0, a),
        "mul": backend.mul(a, -1.0), "div": backend.div(a, 2.0), "exp": backend.exp(a),
        "log": backend.log(np.abs(a) + f(1)), "maximum": backend.maximum(a, 0.1), "relu": backend.relu(a),
        "relu_grad": backend.relu_grad(a, a), "matmul": backend.matmul(a, b), "transpose": backend.transpose(a),
        "sum": backend.sum(x, (0, 2, 3)), "conv2d": backend.conv2d(x, w, 1, 1),
        "conv2d_grad_input": backend.conv2d_grad_input(g, w, x.shape, 1, 1),
        "conv2d_grad_weight": backend.conv2d_grad_weight(g, x, w.shape, 1, 1),
    }
    pooled, arg = backend.maxpool2d(x, 2, 2)
    outs["maxpool2d"] = pooled
    outs["maxpool2d_grad"] = backend.maxpool2d_grad(pooled, arg, x.shape, 2, 2)
    outs["softmax_cross_entropy"] = backend.softmax_cross_entropy(a, np.array([0, 1, 2, 3]))[1]
    assert {k: str(v.dtype) for k, v in outs.items()} == {k: "float32" for k in outs}


def test_a_float32_model_trains_in_float32():
    """Parameters, batches and gradients stay float32 through fit (a float64 batch is cast to the model's dtype)."""
    from dlperf.nn.data import digits

    Xtr, Xte, ytr, yte = digits()
    for mode in ("vectorized", "sequential"):
        with ops.Device(mode):
            model = nn.mlp([64, 16, 10], seed=0, dtype="float32")
            model.fit(Xtr, ytr, epochs=1, batch_size=32, max_batches=2)
            dtypes = {str(v.dtype) for layer in model.layers for v in [*layer.params.values(), *layer.grads.values()]}
            assert dtypes == {"float32"}, (mode, dtypes)
            assert model.forward(model._batch(Xte[:4])).dtype == np.float32


def test_nn_mlp_computes_in_the_requested_dtype(monkeypatch):
    """Every matrix product of the nn-vectorized two-layer net sees float32 operands when float32 is asked."""
    seen: list[tuple[str, str]] = []
    matmul = vec.matmul

    def spy(a, b):
        seen.append((str(a.dtype), str(b.dtype)))
        return matmul(a, b)

    monkeypatch.setattr(vec, "matmul", spy)
    mlp = get_workload("mlp")
    for dtype in ("float32", "float64"):
        seen.clear()
        p = mlp.parse({"variant": "tensors", "size": "custom", "n": 8, "d_in": 16, "h": 8, "d_out": 4,
                       "dtype": dtype})
        step = mlp.build(get_framework("nn-vectorized"), "cpu", p)
        step.fn()
        assert seen and set(seen) == {(dtype, dtype)}, seen


def _markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header, body rows) of every Markdown table in `text`."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if current is None:
            current = []
            tables.append((cells, current))
        elif not set(line) <= set("|-: "):
            current.append(cells)
    return tables


def _table(text: str, *columns: str) -> list[list[str]]:
    """The body of the one Markdown table whose header starts with `columns`."""
    (rows,) = [rows for header, rows in _markdown_tables(text) if tuple(header[:len(columns)]) == columns]
    return rows


def _run_and_report(tmp_path: Path, name: str, yaml_text: str) -> tuple[Path, str]:
    """Run the study `yaml_text` (named `name`) into a fresh store; (the store, its Markdown report)."""
    study = tmp_path / f"{name}.yaml"
    study.write_text(yaml_text)
    db = tmp_path / "r.sqlite"
    res = run_cli("run", str(study), db=db)
    assert res.returncode == 0, res.stderr
    md = run_cli("report", name, "--format", "markdown", db=db)
    assert md.returncode == 0, md.stderr
    return db, md.stdout


@pytest.mark.e2e
def test_mixed_dtype_ops_study_shows_every_case_in_every_table(tmp_path):
    db, md = _run_and_report(tmp_path, "ops_mixed",
                             "name: ops_mixed\nworkload: ops\nframeworks: [numpy, torch, nn-vectorized]\n"
                             "params: {op: [add, dot], size_mb: [0.5], dtype: [float32, float64, bfloat16]}\n"
                             "exclude: [{framework: torch, dtype: float64}]\n"
                             "budget_s: 0.1\nmin_run_time_s: 0.02\nenergy: false\n")
    exported = json.loads(run_cli("export", "ops_mixed", "--format", "json", db=db).stdout)
    cases = exported["results"]
    ok = [c for c in cases if c["status"] == "ok"]
    unsupported = {(c["framework"], c["params"]["dtype"]) for c in cases if c["status"] == "unsupported"}
    assert unsupported == {("numpy", "bfloat16"), ("nn-vectorized", "bfloat16")}
    # 3 frameworks x 2 ops x 3 dtypes, less the 4 unsupported bfloat16 cases and torch's float64 (excluded: numpy
    # and nn-vectorized show float64 beside float32, torch bfloat16 beside float32; two torch workers fewer)
    assert len(ok) == 12
    for c in ok:  # the stored bytes are the arrays built: the working set asked for, in every dtype
        assert 0.9 * 0.5 * 2**20 <= c["metrics"]["bytes_per_call"] <= 0.5 * 2**20, c
    layout = _table(md, "MB", "framework/device", "dtype")  # Table 2 (add, dot), this machine
    shown = {(row[1], row[2]) for row in layout}
    want = {(f"{c['framework']}/cpu", c["params"]["dtype"]) for c in ok}
    assert shown == want and len(layout) == len(want)  # one row per (framework, dtype): none overwritten
    for row in layout:  # both ops ran for each (framework, dtype): no MFlop/s cell lost to another dtype
        assert "-" not in row[3::2], row  # (Efic.% is '-' where no peak is known for the dtype, e.g. float64)
    roofline = [rows for header, rows in _markdown_tables(md) if "FLOP/byte" in header]
    assert len(roofline) == 1 and len(roofline[0]) == len(ok)  # the roofline table lists every ok case


@pytest.mark.e2e
def test_mixed_dtype_mlp_study_keeps_both_rows(tmp_path):
    _, md = _run_and_report(tmp_path, "mlp_mixed",
                            "name: mlp_mixed\nworkload: mlp\nframeworks: [numpy, nn-vectorized]\n"
                            "params: {variant: tensors, size: custom, n: 16, d_in: 64, h: 16, d_out: 8, "
                            "iterations: 10, dtype: [float32, float64]}\nbudget_s: 0.1\nmin_run_time_s: 0.02\n"
                            "energy: false\n")
    rows = _table(md, "framework", "variant", "size", "dtype")  # study 000's layout
    keyed = {(r[0], r[3]): r[5] for r in rows}  # (framework, dtype) -> reps
    assert keyed == {(fw, dt): "1" for fw in ("numpy", "nn-vectorized") for dt in ("float32", "float64")}


@pytest.mark.e2e
def test_mixed_precision_cnn_study_keeps_both_in_every_table(tmp_path):
    _, md = _run_and_report(tmp_path, "cnn_mixed", "name: cnn_mixed\nworkload: cnn\nframeworks: [torch]\n"
                            "params: {model: lenet5, batch: 2, precision: [fp32, amp]}\n"
                            "steps: 2\nwarmup: 1\nenergy: false\nprofile: true\n")
    times = _table(md, "model", "framework", "device", "image", "precision", "batch")
    assert sorted((r[4], r[6]) for r in times) == [("amp", "ok"), ("fp32", "ok")]
    largest = _table(md, "model", "framework", "device", "image", "precision", "largest batch that ran")
    assert sorted(r[4] for r in largest) == ["amp", "fp32"]
    (kernels,) = [h for h, _ in _markdown_tables(md) if h[0] == "kernel family"]
    assert "torch cpu fp32 time/step" in kernels and "torch cpu amp time/step" in kernels
