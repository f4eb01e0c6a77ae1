"""The two-layer net in PyTensor: `tensors` (hand-written gradient graph) and `autograd` (pytensor.grad),
compiled with the weight updates as shared-variable `updates`."""

from __future__ import annotations

import warnings

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.mlp import MlpParams


def build(fw: Framework, device: str, p: MlpParams) -> Step:
    variant, dtype, state, lr = p.variant, p.dtype, p.initial_state(), p.lr
    if variant not in ("tensors", "autograd"):
        raise UnsupportedError(f"{fw.name} has no {variant!r} variant (custom autograd Functions are PyTorch's)")
    mod = fw.import_module()
    T = mod.tensor
    x, y, w1, w2 = (mod.shared(state[k].astype(dtype), name=k) for k in ("x", "y", "w1", "w2"))
    h = T.dot(x, w1)
    h_relu = T.maximum(h, 0)
    diff = T.dot(h_relu, w2) - y
    loss = T.sum(diff**2)
    if variant == "tensors":
        grad_y_pred = 2.0 * diff
        g2 = T.dot(h_relu.T, grad_y_pred)
        g1 = T.dot(x.T, T.switch(T.lt(h, 0), 0.0, T.dot(grad_y_pred, w2.T)))
    else:
        g1, g2 = mod.grad(loss, [w1, w2])
    rate = np.asarray(lr, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the no-BLAS warning is recorded in the fingerprint
        fn = mod.function([], loss, updates=[(w1, w1 - rate * g1), (w2, w2 - rate * g2)])
    losses: list[float] = []

    def step() -> float:
        value = float(fn())
        losses.append(value)
        return value

    return Step(step, lambda: np.array(losses))
