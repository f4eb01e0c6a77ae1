"""The two-layer net in JAX: `tensors` (hand-written gradients) and `autograd` (jax.value_and_grad), jitted."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.mlp import MlpParams


def build(fw: Framework, device: str, p: MlpParams) -> Step:
    variant, dtype, state, lr = p.variant, p.dtype, p.initial_state(), p.lr
    if variant not in ("tensors", "autograd"):
        raise UnsupportedError(f"JAX has no {variant!r} variant (custom autograd Functions are PyTorch's)")
    jax = fw.import_module()
    jnp = jax.numpy
    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    dev = fw.jax_device(device)  # type: ignore[attr-defined]
    x, y, w1, w2 = (jax.device_put(jnp.asarray(state[k], dtype=getattr(jnp, dtype)), dev)
                    for k in ("x", "y", "w1", "w2"))

    def loss_fn(w1: Any, w2: Any) -> Any:
        return jnp.sum((jnp.maximum(x @ w1, 0) @ w2 - y) ** 2)

    if variant == "tensors":
        def train(w1: Any, w2: Any) -> Any:
            h = x @ w1
            h_relu = jnp.maximum(h, 0)
            diff = h_relu @ w2 - y
            grad_y_pred = 2.0 * diff
            grad_w2 = h_relu.T @ grad_y_pred
            grad_h = jnp.where(h < 0, 0.0, grad_y_pred @ w2.T)
            grad_w1 = x.T @ grad_h
            return w1 - lr * grad_w1, w2 - lr * grad_w2, jnp.sum(diff**2)
    else:
        value_and_grad = jax.value_and_grad(loss_fn, argnums=(0, 1))

        def train(w1: Any, w2: Any) -> Any:
            loss, (g1, g2) = value_and_grad(w1, w2)
            return w1 - lr * g1, w2 - lr * g2, loss

    jitted = jax.jit(train)
    weights = [w1, w2]
    losses: list[Any] = []

    def step() -> Any:
        weights[0], weights[1], loss = jitted(weights[0], weights[1])
        losses.append(loss)
        return loss

    return Step(step, lambda: np.array([float(v) for v in losses]))
