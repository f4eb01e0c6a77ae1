"""The ops workload's transformer ops (attention, layernorm, gelu, softmax over attention scores): the same
output on every framework, the cost model by its written convention and against FlopCounterMode, the shape
fields' validation, and torch's attention backends (which exist on CPU, which are CUDA-only)."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.errors import StudyError
from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.studies.loader import load_study
from dlperf.workloads import get_workload
from dlperf.workloads.ops import spec
from tests.conftest import torch_counted_flops

FRAMEWORKS = ["numpy", "torch", "tensorflow", "tensorflow-eager", "jax", "pytensor", "nn-vectorized", "nn-sequential",
              "onnxruntime", "openvino"]
W = get_workload("ops")
#: Small transformer shapes (B=2, H=3, T=16, D=8, width 32), every op, attention causal or not.
CASES = {
    "attention": {"op": "attention", "batch": 2, "heads": 3, "seq_len": 16, "head_dim": 8},
    "attention-causal": {"op": "attention", "batch": 2, "heads": 3, "seq_len": 16, "head_dim": 8, "causal": True},
    "softmax": {"op": "softmax", "batch": 2, "heads": 3, "seq_len": 16},
    "layernorm": {"op": "layernorm", "batch": 2, "seq_len": 16, "width": 32},
    "gelu": {"op": "gelu", "batch": 2, "seq_len": 16, "width": 32},
}
#: (framework, op) pairs that are unsupported, each with the reason its builder gives.
KNOWN_GAPS = {(f, op) for f in ("nn-vectorized", "nn-sequential") for op in ("attention", "softmax", "layernorm")}


def params(case: str, **changes):
    return W.parse(CASES[case] | changes)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", list(CASES))
def test_same_output_on_every_framework(framework, case):
    p = params(case)
    ref = p.reference()
    try:
        step = W.build(get_framework(framework), "cpu", p)
    except UnsupportedError as exc:
        assert (framework, p.op) in KNOWN_GAPS, exc
        assert str(exc)
        return
    step.fn()
    step.fn()  # twice: the kept output is the op's result, not an accumulation
    got = step.result()
    assert got.shape == ref.shape
    # float32 against the float64 reference: measured errors are ~1.5e-7 of the output's scale on every framework
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6 * max(1.0, float(np.abs(ref).max())))
    model = W.cost(p)
    assert sum(step.array_nbytes().values()) == model.bytes_moved  # the arrays built are those the model counts
    assert W.built_cost(p, step) == model


def test_jax_float16_attention_on_cpu_is_unsupported_with_xlas_reason():
    with pytest.raises(UnsupportedError, match="dot_product_attention in float16 on cpu: .*not supported"):
        W.build(get_framework("jax"), "cpu", params("attention", dtype="float16"))


def test_causal_mask_changes_the_output():
    a, c = params("attention").reference(), params("attention-causal").reference()
    assert not np.allclose(a, c)
    np.testing.assert_allclose(a[:, :, -1], c[:, :, -1])  # the last query sees every key either way


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax", "tensorflow"])
@pytest.mark.parametrize("case", ["attention-causal", "layernorm", "gelu"])
def test_half_precision_within_its_tolerance(framework, case):
    dtype = "float16" if framework in ("numpy", "torch") else "bfloat16"
    p = params(case, dtype=dtype)
    step = W.build(get_framework(framework), "cpu", p)
    step.fn()
    tol = 2e-2 if dtype == "float16" else 6e-2  # bfloat16 keeps 8 bits of mantissa
    np.testing.assert_allclose(step.result(), p.reference(), rtol=tol, atol=tol)


def test_costs_follow_the_documented_convention():
    b, h, t, d = 2, 3, 16, 8
    att = W.cost(params("attention"))
    assert att.flops == 4 * b * h * t * t * d + 6 * b * h * t * t  # the two products, then scale and softmax
    assert att.bytes_moved == 4 * b * h * t * d * 4  # q, k, v, out in float32
    assert W.cost(params("attention-causal")) == att  # the whole square either way
    assert W.cost(params("softmax")).flops == 5 * (b * h * t) * t
    n, w = 2 * 16, 32
    ln = W.cost(params("layernorm"))
    assert ln.flops == 7 * n * w + 4 * n and ln.bytes_moved == (2 * n * w + 2 * w) * 4
    g = W.cost(params("gelu", dtype="bfloat16"))
    assert g.flops == 14 * n * w and g.bytes_moved == 2 * n * w * 2


def test_attention_products_match_flop_counter_mode():
    """FlopCounterMode counts SDPA's two products (4 B H T S D) when the math backend runs; it counts 0 for
    torch's CPU flash kernel (it has no formula for it), so the cost model is the only count there."""
    fw = get_framework("torch")
    for case in ("attention", "attention-causal"):
        p = params(case, backend="math")
        assert torch_counted_flops(W.build(fw, "cpu", p).fn) == spec.attention_matmul_flops(p.shape())
    assert torch_counted_flops(W.build(fw, "cpu", params("attention", backend="flash")).fn) == 0


def test_sized_ops_keep_their_cases():
    p = W.parse({"op": "softmax", "size_mb": 2})
    assert p.model_dump(mode="json", exclude_none=True) == {"op": "softmax", "size_mb": 2.0, "dtype": "float32"}
    assert W.shape(p) == {"rows": 2 * 2**20 // (2 * 4 * 1024), "cols": 1024}
    assert W.shape(params("softmax")) == {"rows": 2 * 3 * 16, "cols": 16}


def test_defaults_are_stored_as_absent():
    written_out = params("attention", causal=False, backend="default")
    assert written_out == params("attention")
    assert "causal" not in written_out.model_dump(exclude_none=True)


@pytest.mark.parametrize(("raw", "message"), [
    ({"op": "attention", "size_mb": 2}, r"op 'attention' takes batch, heads, seq_len, head_dim \(given: size_mb\)"),
    ({"op": "attention", "batch": 1, "heads": 2, "seq_len": 8},
     r"takes batch, heads, seq_len, head_dim \(given: batch, heads, seq_len\)"),
    ({"op": "softmax", "size_mb": 2, "batch": 1}, "op 'softmax' takes size_mb or batch, heads, seq_len"),
    ({"op": "add", "batch": 1, "seq_len": 8, "width": 4}, r"op 'add' takes size_mb \(given: batch, seq_len, width\)"),
    ({"op": "layernorm", "batch": 1, "seq_len": 8, "width": 4, "heads": 2}, "takes batch, seq_len, width"),
    ({"op": "add"}, r"op 'add' takes size_mb \(given: none\)"),
    ({"op": "gelu", "batch": 1, "seq_len": 8, "width": 4, "causal": True}, "causal applies to op 'attention' only"),
    ({"op": "softmax", "size_mb": 1, "backend": "flash"}, "backend applies to op 'attention' only"),
])
def test_a_wrong_combination_is_one_clear_error(raw, message):
    with pytest.raises(ValueError, match=message):
        W.parse(raw)


def test_a_study_with_a_wrong_combination_says_where(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nworkload: ops\nframeworks: [numpy]\ndevices: [cpu]\n"
                    "params:\n  - {op: add, size_mb: 1}\n  - {op: gelu, size_mb: 1}\n")
    with pytest.raises(StudyError, match=r"params\[1\].*op 'gelu' takes batch, seq_len, width \(given: size_mb\)"):
        load_study(str(path))


@pytest.mark.parametrize("backend", ["math", "flash"])
@pytest.mark.parametrize("case", ["attention", "attention-causal"])
def test_torch_runs_the_cpu_backends_it_has(backend, case):
    """On CPU torch 2.13 has math and flash (its default choice); the kernel that runs is the one selected."""
    import torch

    from dlperf.workloads.ops.torch_ops import chosen_backend, sdpa_backends

    p = params(case, backend=backend)
    step = W.build(get_framework("torch"), "cpu", p)
    step.fn()
    np.testing.assert_allclose(step.result(), p.reference(), rtol=1e-5, atol=2e-6)
    q, k, v = (torch.from_numpy(a) for a in p.inputs().values())
    assert chosen_backend(torch, q, k, v, bool(p.causal), sdpa_backends(torch, backend)) == backend
    assert chosen_backend(torch, q, k, v, bool(p.causal), sdpa_backends(torch, None)) == "flash"  # default


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_torch_cuda_only_backends_are_unsupported_on_cpu(backend):
    with pytest.raises(UnsupportedError, match=f"cannot run the {backend} attention backend on cpu.*math and flash"):
        W.build(get_framework("torch"), "cpu", params("attention", backend=backend))


@pytest.mark.parametrize("framework", ["numpy", "jax", "tensorflow", "pytensor", "nn-vectorized"])
def test_other_frameworks_take_only_the_default_backend(framework):
    with pytest.raises(UnsupportedError, match="has one attention implementation .*not math"):
        W.build(get_framework(framework), "cpu", params("attention", backend="math"))


def test_the_study_runs_the_transformer_ops_at_gpt2_small_shapes():
    full = load_study("ops").cases
    shaped = [c.params for c in full if c.params["op"] in ("attention", "layernorm", "gelu") or "seq_len" in c.params]
    att = [p for p in shaped if p["op"] == "attention"]
    assert {p["seq_len"] for p in att} == {128, 256, 512, 1024}
    assert {(p["heads"], p["head_dim"]) for p in att} == {(12, 64)}
    assert {p.get("backend", "default") for p in att} >= {"default", "math", "flash", "efficient", "cudnn"}
    assert {p["width"] for p in shaped if p["op"] in ("layernorm", "gelu")} == {768, 3072}
    sized = [c.params for c in full if "size_mb" in c.params]
    assert all(set(p) == {"op", "size_mb", "dtype"} for p in sized)  # the study's sized cases, as they were
    quick = load_study("ops", quick=True).cases
    assert {c.params["op"] for c in quick} >= {"attention", "layernorm", "gelu"}


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["default", "math", "flash", "efficient", "cudnn"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_cuda_attention_backends(backend, dtype):
    """Each SDPA backend on CUDA at a GPT-2 head shape: the selected kernel is the one torch dispatches to, and
    its output is the reference's. flash and cuDNN need compute capability 8.0+ (and cuDNN torch's cuDNN 9);
    there a backend torch cannot run ends `unsupported` with torch's reason."""
    import torch

    from dlperf.workloads.ops.torch_ops import chosen_backend, sdpa_backends

    fw = get_framework("torch")
    device = fw.check_device("cuda")
    p = W.parse({"op": "attention", "batch": 2, "heads": 12, "seq_len": 128, "head_dim": 64, "causal": True,
                 "backend": backend, "dtype": dtype})
    major, _ = torch.cuda.get_device_capability()
    may_lack = {"flash", "cudnn"} if major < 8 else set()
    if (torch.backends.cudnn.version() or 0) < 90000:
        may_lack.add("cudnn")
    try:
        step = W.build(fw, device, p)
    except UnsupportedError as exc:
        assert backend in may_lack, exc
        return
    run, sync = fw.prepare(step.fn, device)
    run()
    sync()
    np.testing.assert_allclose(step.result(), p.reference(), rtol=2e-2, atol=2e-2)
    q, k, v = (torch.from_numpy(a).to(device, getattr(torch, dtype)) for a in p.inputs().values())
    chosen = chosen_backend(torch, q, k, v, True, sdpa_backends(torch, p.backend))
    if backend != "default":
        assert chosen == backend
    else:  # torch's own choice for half precision on a CUDA GPU is a fused kernel
        assert chosen in ("flash", "efficient", "cudnn"), chosen


@pytest.mark.gpu
def test_torch_cuda_flash_refuses_float32_with_torchs_reason():
    fw = get_framework("torch")
    p = params("attention", backend="flash", head_dim=64)
    with pytest.raises(UnsupportedError, match="cannot run the flash attention backend on cuda"):
        W.build(fw, fw.check_device("cuda"), p)


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy", "jax", "tensorflow"])
@pytest.mark.parametrize("case", list(CASES))
def test_same_output_on_the_gpu(framework, case):
    fw = get_framework(framework)
    if not fw.available():
        pytest.fail(f"a GPU is present but {framework} is not installed: pip install -e '.[gpu]' and its CUDA build")
    p = params(case)
    step = W.build(fw, fw.check_device("cuda"), p)
    run, sync = fw.prepare(step.fn, "cuda:0")
    run()
    sync()
    tol = 5e-3 if p.op == "attention" else 1e-5  # TF32 may be on for GPU matrix products
    ref = p.reference()
    np.testing.assert_allclose(step.result(), ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))


def test_the_report_names_each_transformer_case_by_its_shape_and_backend():
    from dlperf.core.result import Metrics
    from dlperf.report.ops_report import OpsPoint, shape_label, study_layout, transformer_rows

    att = CASES["attention-causal"] | {"dtype": "float32", "backend": "flash"}
    assert shape_label(att) == "B2 H3 T16 D8 causal flash"
    assert shape_label(CASES["attention"]) == "B2 H3 T16 D8 default"
    assert shape_label(CASES["layernorm"]) == "B2 T16 W32"
    assert shape_label({"op": "softmax", "size_mb": 2.0}) == ""

    def point(raw: dict, median_s: float) -> OpsPoint:
        p = W.parse(raw)
        c = W.cost(p)
        m = Metrics(median_s=median_s, flops_per_s=c.flops / median_s, bytes_per_s=c.bytes_moved / median_s)
        roof = {"pct_flop_peak": None}
        return OpsPoint("torch", "cpu", p.op, p.working_set_mb(), p.dtype, m, roof, None, shape_label(raw))

    flash, math_ = point(att, 1e-3), point(att | {"backend": "math"}, 2e-3)
    sized = point({"op": "softmax", "size_mb": 2.0}, 1e-3)
    header, rows = transformer_rows([flash, math_, sized])
    assert [r[1] for r in rows] == ["B2 H3 T16 D8 causal flash", "B2 H3 T16 D8 causal math"]  # apart, not merged
    assert rows[0][header.index("ms")] == "1.000"
    _, layout = study_layout([flash, sized], ("softmax", "attention"))
    assert len(layout) == 1  # study 002's layout holds the sized case only
