"""The two-layer net in PyTorch, the study's three programs: `tensors` (hand-written
backprop), `autograd`, and `custom_function` (ReLU as a custom autograd Function)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.mlp import MlpParams


def _relu_function(torch: Any) -> Any:
    class MyReLU(torch.autograd.Function):
        """ReLU with its own backward, as in the study's third program."""

        @staticmethod
        def forward(ctx: Any, inp: Any) -> Any:
            ctx.save_for_backward(inp)
            return inp.clamp(min=0)

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            (inp,) = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad_input[inp < 0] = 0
            return grad_input

    return MyReLU


def build(fw: Framework, device: str, p: MlpParams) -> Step:
    variant, dtype, state, lr = p.variant, p.dtype, p.initial_state(), p.lr
    torch = fw.import_module()
    dt = getattr(torch, dtype)
    t = {k: torch.from_numpy(v).to(device=device, dtype=dt) for k, v in state.items()}
    x, y, w1, w2 = t["x"], t["y"], t["w1"], t["w2"]
    losses: list[Any] = []

    if variant == "tensors":
        def step() -> Any:
            h = x.mm(w1)
            h_relu = h.clamp(min=0)
            y_pred = h_relu.mm(w2)
            diff = y_pred - y
            loss = diff.pow(2).sum()
            grad_y_pred = 2.0 * diff
            grad_w2 = h_relu.t().mm(grad_y_pred)
            grad_h = grad_y_pred.mm(w2.t())
            grad_h[h < 0] = 0
            grad_w1 = x.t().mm(grad_h)
            w1.sub_(lr * grad_w1)
            w2.sub_(lr * grad_w2)
            losses.append(loss)
            return loss
    else:
        w1.requires_grad_(True)
        w2.requires_grad_(True)
        relu = _relu_function(torch).apply if variant == "custom_function" else (lambda v: v.clamp(min=0))

        def step() -> Any:
            y_pred = relu(x.mm(w1)).mm(w2)
            loss = (y_pred - y).pow(2).sum()
            loss.backward()
            with torch.no_grad():
                w1.sub_(lr * w1.grad)
                w2.sub_(lr * w2.grad)
                w1.grad = None
                w2.grad = None
            losses.append(loss.detach())
            return loss

    # losses stay on the device while timing; converted only when checked
    return Step(step, lambda: np.array([float(v) for v in losses]))
