"""The ops workload on the inference runtimes (ONNX Runtime, OpenVINO): outputs in the dtypes each runs, checked
against the float64 reference, and the dtypes each cannot run, or would run below their precision, refused with
the reason. (float32 outputs of every op are checked with every other framework in test_ops*.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.workloads import get_workload
from dlperf.workloads.ops import spec

W = get_workload("ops")
SHAPED = {
    "attention": {"op": "attention", "batch": 2, "heads": 3, "seq_len": 16, "head_dim": 8, "causal": True},
    "layernorm": {"op": "layernorm", "batch": 2, "seq_len": 16, "width": 32},
    "gelu": {"op": "gelu", "batch": 2, "seq_len": 16, "width": 32},
}
#: Half precision: the tolerances test_ops_transformer uses (bfloat16 keeps 8 bits of mantissa).
TOL = {"float16": 2e-2, "bfloat16": 6e-2}


def case(op: str, dtype: str):
    return W.parse((SHAPED[op] if op in SHAPED else {"op": op, "size_mb": 0.2}) | {"dtype": dtype})


def run(framework: str, p):
    step = W.build(get_framework(framework), "cpu", p)
    step.fn()
    step.fn()
    assert W.built_cost(p, step) == W.cost(p)  # the arrays are the case's dtype: nothing was cast silently
    return step.result()


@pytest.mark.parametrize("framework", ["onnxruntime", "openvino"])
@pytest.mark.parametrize("op", [*spec.OPS, *SHAPED])
def test_float16_within_its_tolerance(framework, op):
    p = case(op, "float16")
    np.testing.assert_allclose(run(framework, p), p.reference(), rtol=TOL["float16"], atol=TOL["float16"])


@pytest.mark.parametrize("op", [*spec.OPS, *SHAPED])
def test_openvino_bfloat16_within_its_tolerance(op):
    p = case(op, "bfloat16")
    np.testing.assert_allclose(run("openvino", p), p.reference(), rtol=TOL["bfloat16"], atol=TOL["bfloat16"])


#: float64 agreement with the reference, per op: the float64 kernels' own rounding (measured: add, tanh, dot,
#: softmax <= 4e-16, layernorm 2e-13), except Gelu, whose constants are float32 attributes in ONNX (1.7e-9);
#: attention is checked against a reference with ONNX Runtime's scaling (below). float32 misses all of these.
F64_TOL = {"add": 1e-12, "tanh": 1e-12, "dot": 1e-12, "softmax": 1e-12, "layernorm": 1e-12, "gelu": 1e-8,
           "attention": 1e-12}


def _ort_attention_reference(p) -> np.ndarray:
    """Attention as ONNX Runtime computes it: q and k each scaled by sqrt(scale), with sqrt(1/sqrt(D)) rounded to
    float32 (a float attribute), not the scores by 1/sqrt(D) -- a 5e-8 difference that float64 must not hide."""
    import math

    x = p.inputs()
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    s = float(np.float32(math.sqrt(1.0 / math.sqrt(q.shape[-1]))))
    scores = (q * s) @ (k * s).swapaxes(-1, -2)
    t = scores.shape[-1]
    if p.causal:
        scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    return spec.reference("softmax", {"a": scores.reshape(-1, t)}).reshape(scores.shape) @ v


@pytest.mark.parametrize("op", ["add", "tanh", "dot", "softmax", *SHAPED])
def test_onnxruntime_float64(op):
    """ONNX Runtime has float64 CPU kernels for these: agreement at float64's level (`F64_TOL`), which the
    float32 case of the same op does not reach (so the tolerance tells the two apart)."""
    p = case(op, "float64")
    ref = _ort_attention_reference(p) if op == "attention" else p.reference()
    tol = F64_TOL[op] * max(1.0, float(np.abs(ref).max()))
    got = run("onnxruntime", p)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=F64_TOL[op], atol=tol)
    p32 = case(op, "float32")
    ref32 = _ort_attention_reference(p32) if op == "attention" else p32.reference()
    assert np.abs(run("onnxruntime", p32) - ref32).max() > F64_TOL[op] * max(1.0, float(np.abs(ref32).max()))


def test_onnxruntime_without_a_kernel_is_unsupported_with_its_message():
    with pytest.raises(UnsupportedError, match=r"onnxruntime .* cannot run conv2d in float64: .*NOT_IMPLEMENTED"):
        W.build(get_framework("onnxruntime"), "cpu", case("conv2d", "float64"))
    with pytest.raises(UnsupportedError, match=r"cannot run add in bfloat16: .*Could not find an implementation"):
        W.build(get_framework("onnxruntime"), "cpu", case("add", "bfloat16"))


def test_onnxruntime_bfloat16_runs_where_it_has_the_kernel():
    p = case("layernorm", "bfloat16")  # the CPU provider's one bfloat16 kernel among the ops
    np.testing.assert_allclose(run("onnxruntime", p), p.reference(), rtol=TOL["bfloat16"], atol=TOL["bfloat16"])


@pytest.mark.parametrize("op", ["add", "dot", "attention"])
def test_openvino_float64_is_refused_not_computed_in_f32(op):
    with pytest.raises(UnsupportedError, match=r"computes this float64 case in f32 \(runtime model: .*\); refused"):
        W.build(get_framework("openvino"), "cpu", case(op, "float64"))


def test_openvino_float16_matrix_products_run_in_f32_not_bf16():
    """With an f16 hint, a CPU without float16 arithmetic runs MatMul in bf16: the builder states f32, and the
    runtime model says what ran."""
    from dlperf.frameworks.openvino_fw import executed_precisions
    from dlperf.workloads.ops.onnx_graph import build_graph

    fw = get_framework("openvino")
    compiled = fw.compile(build_graph(case("dot", "float16")).model, "cpu", "fp32")
    matmuls = [prec for _, layer, prec in executed_precisions(compiled) if layer == "MatMul"]
    assert matmuls == ["f32"]


@pytest.mark.parametrize("framework", ["onnxruntime", "openvino"])
def test_the_step_writes_into_a_kept_output(framework):
    """Inputs and output are bound once: a second call rewrites the same output, nothing accumulates."""
    p = case("add", "float32")
    step = W.build(get_framework(framework), "cpu", p)
    step.fn()
    first = step.result()
    step.fn()
    np.testing.assert_array_equal(step.result(), first)
    np.testing.assert_allclose(first, p.reference(), rtol=1e-6)


def test_a_chosen_attention_backend_is_torchs():
    p = W.parse(SHAPED["attention"] | {"backend": "flash"})
    for framework in ("onnxruntime", "openvino"):
        with pytest.raises(UnsupportedError, match="has one attention implementation"):
            W.build(get_framework(framework), "cpu", p)
