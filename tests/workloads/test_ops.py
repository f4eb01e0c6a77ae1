"""The ops workload: the same op on the same inputs gives the same output on every framework,
and its cost model agrees with an independent counter (torch's FlopCounterMode)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.workloads import get_workload
from dlperf.workloads.ops import spec
from tests.conftest import torch_counted_flops

FRAMEWORKS = ["numpy", "torch", "tensorflow", "tensorflow-eager", "tensorflow-xla", "jax", "pytensor", "nn-vectorized",
              "nn-sequential", "onnxruntime", "openvino"]
#: (framework, op) pairs that are unsupported, each with the reason its builder gives.
KNOWN_GAPS = {("pytensor", "conv2d"), ("nn-vectorized", "softmax"), ("nn-sequential", "softmax")}
W = get_workload("ops")


def params(op, size_mb=0.2, dtype="float32"):
    return W.parse({"op": op, "size_mb": size_mb, "dtype": dtype})


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("op", spec.OPS)
def test_same_output_on_every_framework(framework, op):
    p = params(op)
    ref = spec.reference(op, spec.make_inputs(op, W.shape(p)))
    fw = get_framework(framework)
    try:
        step = W.build(fw, "cpu", p)
    except UnsupportedError as exc:
        assert (framework, op) in KNOWN_GAPS, exc  # known gaps, each stated by its builder
        return
    step.fn()
    step.fn()  # twice: the kept output is the op's result, not an accumulation
    got = step.result()
    assert got.shape == ref.shape
    # fp32 against a float64 reference: relative to the output's scale
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_half_precision_within_its_tolerance(framework):
    p = params("dot", 0.5, "float16")
    ref = spec.reference("dot", spec.make_inputs("dot", W.shape(p)))
    step = W.build(get_framework(framework), "cpu", p)
    step.fn()
    np.testing.assert_allclose(step.result(), ref, rtol=2e-2, atol=2e-2)


def test_bfloat16_is_unsupported_where_the_framework_lacks_it():
    with pytest.raises(UnsupportedError, match="numpy has no bfloat16"):
        W.build(get_framework("numpy"), "cpu", params("add", dtype="bfloat16"))


@pytest.mark.parametrize(("op", "size_mb"), [("dot", 0.5), ("dot", 3), ("dot", 17), ("conv2d", 1), ("conv2d", 6)])
def test_flops_match_flop_counter_mode(op, size_mb):
    p = params(op, size_mb)
    assert torch_counted_flops(W.build(get_framework("torch"), "cpu", p).fn) == W.cost(p).flops


def test_elementwise_counts_follow_the_documented_convention():
    for op, per_element, arrays in [("add", 1, 3), ("mul", 1, 3), ("scalar", 1, 2), ("relu", 1, 2),
                                    ("sigmoid", 4, 2), ("tanh", 6, 2), ("softmax", 5, 2)]:
        p = params(op, 4.0)
        shape = W.shape(p)
        n = shape["rows"] * shape["cols"] if op == "softmax" else shape["n"]
        c = W.cost(p)
        assert c.flops == per_element * n, op
        assert c.bytes_moved == arrays * n * 4, op
        assert c.bytes_moved <= 4 * 2**20  # the working set fits the requested size


def test_working_set_size_is_what_was_asked():
    for op in spec.OPS:
        for size_mb in (2, 32):
            c = W.cost(params(op, size_mb))
            assert 0.9 * size_mb * 2**20 <= c.bytes_moved <= size_mb * 2**20, op


def test_dot_shape_and_cost():
    p = params("dot", 12)
    n = W.shape(p)["n"]
    assert n == math.isqrt(12 * 2**20 // 12)
    assert W.cost(p).flops == 2 * n**3


def test_matmul_is_an_alias_of_dot():
    assert W.parse({"op": "matmul", "size_mb": 1}).op == "dot"


def test_torch_step_writes_into_a_kept_buffer():
    step = W.build(get_framework("torch"), "cpu", params("add"))
    first = step.fn()
    assert step.fn() is first  # no allocation per call, nothing for a compiler to eliminate


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy", "jax", "tensorflow"])
@pytest.mark.parametrize("op", spec.OPS)
def test_same_output_on_the_gpu(framework, op):
    fw = get_framework(framework)
    if not fw.available():
        pytest.fail(f"a GPU is present but {framework} is not installed: pip install -e '.[gpu]' and its CUDA build")
    p = params(op)
    ref = spec.reference(op, spec.make_inputs(op, W.shape(p)))
    try:
        step = W.build(fw, fw.check_device("cuda"), p)
    except UnsupportedError as exc:
        assert (framework, op) == ("cupy", "conv2d"), exc
        return
    run, sync = fw.prepare(step.fn, "cuda:0")
    run()
    sync()
    # TF32 may be on for GPU matrix products: a looser tolerance for dot and conv2d only
    tol = 5e-3 if op in ("dot", "conv2d") else 1e-5
    np.testing.assert_allclose(step.result(), ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))
