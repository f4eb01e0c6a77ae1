"""The two-layer net in dlperf.nn: hand-written gradients (`tensors`) through the operator table, in the case's
dtype (a dtype the backend does not compute in is `unsupported`)."""

from __future__ import annotations

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.mlp import MlpParams


def build(fw: Framework, device: str, p: MlpParams) -> Step:
    variant, state, lr = p.variant, p.initial_state(), p.lr
    if variant != "tensors":
        raise UnsupportedError(f"dlperf.nn trains with hand-written gradients only: no {variant!r} variant")
    fw.import_module()  # selects the backend
    from dlperf.nn import operators as ops

    fw.check_dtype(p.dtype)  # type: ignore[attr-defined]
    b = ops.backend()
    x, y = b.asarray(state["x"].astype(p.dtype)), b.asarray(state["y"].astype(p.dtype))
    w = {"w1": b.asarray(state["w1"].astype(p.dtype)), "w2": b.asarray(state["w2"].astype(p.dtype))}
    losses: list[float] = []

    def step() -> float:
        h = ops.matmul(x, w["w1"])
        h_relu = ops.relu(h)
        diff = ops.sub(ops.matmul(h_relu, w["w2"]), y)
        loss = float(np.asarray(b.to_numpy(ops.sum(ops.sum(ops.mul(diff, diff), 1), 0))))
        grad_y_pred = ops.mul(diff, 2.0)
        grad_w2 = ops.matmul(ops.transpose(h_relu), grad_y_pred)
        grad_h = ops.relu_grad(h, ops.matmul(grad_y_pred, ops.transpose(w["w2"])))
        grad_w1 = ops.matmul(ops.transpose(x), grad_h)
        w["w1"] = ops.sub(w["w1"], ops.mul(grad_w1, lr))
        w["w2"] = ops.sub(w["w2"], ops.mul(grad_w2, lr))
        losses.append(loss)
        return loss

    return Step(step, lambda: np.array(losses))
