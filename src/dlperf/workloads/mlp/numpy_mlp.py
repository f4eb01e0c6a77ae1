"""The two-layer net in NumPy: hand-written gradients only (NumPy has no autograd)."""

from __future__ import annotations

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.mlp import MlpParams


def build(fw: Framework, device: str, p: MlpParams) -> Step:
    variant, dtype, state, lr = p.variant, p.dtype, p.initial_state(), p.lr
    if variant != "tensors":
        raise UnsupportedError(f"NumPy has no automatic differentiation: variant {variant!r} needs a framework")
    x, y, w1, w2 = (state[k].astype(dtype) for k in ("x", "y", "w1", "w2"))
    losses: list[float] = []

    def step() -> float:
        h = x @ w1
        h_relu = np.maximum(h, 0)
        y_pred = h_relu @ w2
        diff = y_pred - y
        loss = float(np.square(diff).sum())
        grad_y_pred = 2.0 * diff
        grad_w2 = h_relu.T @ grad_y_pred
        grad_h = grad_y_pred @ w2.T
        grad_h[h < 0] = 0
        grad_w1 = x.T @ grad_h
        np.subtract(w1, lr * grad_w1, out=w1)  # in place: the weights live across iterations
        np.subtract(w2, lr * grad_w2, out=w2)
        losses.append(loss)
        return loss

    return Step(step, lambda: np.array(losses))
