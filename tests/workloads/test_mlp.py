"""The mlp workload (study 000): every variant in every framework follows the same loss trajectory;
its cost model agrees with FlopCounterMode; its study and report."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.studies import load_study
from dlperf.workloads import get_workload
from dlperf.workloads.mlp import spec
from tests.conftest import run_cli, torch_counted_flops

W = get_workload("mlp")
SUPPORTED = [("numpy", "tensors"), ("torch", "tensors"), ("torch", "autograd"), ("torch", "custom_function"),
             ("jax", "tensors"), ("jax", "autograd"), ("tensorflow", "tensors"), ("tensorflow", "autograd"),
             ("tensorflow-eager", "tensors"), ("tensorflow-eager", "autograd"), ("pytensor", "tensors"),
             ("pytensor", "autograd"), ("nn-vectorized", "tensors"), ("nn-sequential", "tensors")]
TINY = {"size": "custom", "n": 8, "d_in": 20, "h": 10, "d_out": 5, "lr": 1e-3}


def trajectory(framework: str, variant: str, dtype: str, steps: int = 15) -> np.ndarray:
    step = W.build(get_framework(framework), "cpu", W.parse({**TINY, "variant": variant, "dtype": dtype}))
    for _ in range(steps):
        step.fn()
    return step.result()


@pytest.fixture(scope="module")
def reference64() -> np.ndarray:
    return trajectory("numpy", "tensors", "float64")


@pytest.mark.parametrize(("framework", "variant"), SUPPORTED)
def test_same_loss_trajectory_everywhere(framework, variant, reference64):
    losses = trajectory(framework, variant, "float64")
    assert len(losses) == 15 and losses[-1] < losses[0]  # it learns
    np.testing.assert_allclose(losses, reference64, rtol=1e-10)
    np.testing.assert_allclose(trajectory(framework, variant, "float32"), reference64, rtol=1e-4)


@pytest.mark.parametrize(("framework", "variant"), [("numpy", "autograd"), ("numpy", "custom_function"),
                                                    ("jax", "custom_function"), ("pytensor", "custom_function")])
def test_variants_a_framework_lacks_are_unsupported(framework, variant):
    with pytest.raises(UnsupportedError):
        W.build(get_framework(framework), "cpu", W.parse({**TINY, "variant": variant}))


def test_study_sizes_are_table_1():
    assert spec.SIZES == {"small": (64, 15000, 100, 150), "medium": (192, 20000, 300, 200),
                          "large": (384, 40000, 600, 400)}
    assert W.parse({"variant": "tensors", "size": "large"}).dims() == spec.Dims(384, 40000, 600, 400)


def test_params_validation():
    with pytest.raises(ValidationError, match="needs n, d_in, h and d_out"):
        W.parse({"variant": "tensors", "size": "custom", "n": 4})
    with pytest.raises(ValidationError, match="use size 'custom'"):
        W.parse({"variant": "tensors", "size": "small", "n": 4})


@pytest.mark.parametrize("variant", ["autograd", "custom_function", "tensors"])
def test_matmul_flops_match_flop_counter_mode(variant):
    p = W.parse({"variant": variant, "size": "custom", "n": 16, "d_in": 40, "h": 12, "d_out": 7})
    assert torch_counted_flops(W.build(get_framework("torch"), "cpu", p).fn) == spec.matmul_flops(p.dims())
    c = W.cost(p)
    assert c.samples == 16 and c.flops > spec.matmul_flops(p.dims())  # plus the documented element-wise part


def test_quick_study_matrix():
    quick = load_study("mlp", quick=True)
    combos = sorted({(c.framework, c.params["variant"], c.params["size"]) for c in quick.cases})
    assert len(combos) == 18 and len(quick.cases) == 18
    assert sum(1 for f, _, _ in combos if f == "torch") == 9
    assert "d_in" not in quick.cases[0].params  # unset dimensions are not part of the case
    full = load_study("mlp")
    assert {c.params["size"] for c in full.cases} == {"small", "medium", "large"}
    assert not any(c.framework == "numpy" and c.params["variant"] != "tensors" for c in full.cases)
    assert {c.repetition for c in full.cases} == set(range(10))


def test_mlp_report_without_a_meter(tmp_path):
    study = tmp_path / "m.yaml"
    study.write_text("name: mlp_tiny\nworkload: mlp\nframeworks: [torch, numpy]\n"
                     "params: {variant: tensors, size: custom, n: 16, d_in: 64, h: 16, d_out: 8, iterations: 500}\n"
                     "budget_s: 0.2\nmin_run_time_s: 0.05\n")
    res = run_cli("run", str(study), db=tmp_path / "r.sqlite")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "study 000 layout" in out and "time/run (derived)" in out
    from dlperf.meters import Empty, make_meter

    if isinstance(make_meter("cpu"), Empty):
        assert "not measured" in out and "energy: not measured: rapl:" in out
    assert "no CUDA cases in this run" in out
    md = run_cli("report", "latest", "--format", "markdown", db=tmp_path / "r.sqlite")
    assert "## Study 000 layout" in md.stdout and "## GPU speedup" in md.stdout


def test_energy_estimate_flags(tmp_path):
    res = run_cli("run", "smoke", "--quick", "--energy-estimate", "tdp", db=tmp_path / "r.sqlite")
    assert res.returncode == 2 and "needs --tdp-w" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = run_cli("run", "smoke", "--quick", "--tdp-w", "100", db=tmp_path / "r.sqlite")
    assert res.returncode == 2 and "only used with --energy-estimate" in res.stderr


@pytest.mark.parametrize("size", ["small", "medium"])
def test_the_dlperf_mlp_source_is_study_000s_net(size: str) -> None:
    """`dlperf:mlp-SIZE` (for bench and the compilers study) is the study's forward pass: with the study's initial
    weights loaded into it, its output equals relu(x @ w1) @ w2 computed in NumPy, and its parameters are
    D_in*H + H*D_out."""
    import torch

    from dlperf.sources import load
    from dlperf.workloads.mlp.spec import SIZES, Dims, initial_state

    n, d_in, h, d_out = SIZES[size]
    loaded = load(f"dlperf:mlp-{size}", seed=0)
    net = loaded.module
    assert sum(p.numel() for p in net.parameters()) == d_in * h + h * d_out
    (x,), _ = loaded.example_inputs(3, None)
    assert tuple(x.shape) == (3, d_in) and x.dtype == torch.float32
    state = initial_state(Dims(4, d_in, h, d_out))
    with torch.no_grad():
        net[0].weight.copy_(torch.from_numpy(state["w1"].T))
        net[2].weight.copy_(torch.from_numpy(state["w2"].T))
        out = net(torch.from_numpy(state["x"]).float()).numpy()
    want = np.maximum(state["x"] @ state["w1"], 0.0) @ state["w2"]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
