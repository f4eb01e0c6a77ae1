"""Layers of dlperf.nn, each with its forward and backward side by side, written only with `operators`.

Arrays: the current backend's (see operators). Shape-only operations (reshape,
transpose of axes) are array methods; all arithmetic goes through `ops`.
Parameters are made in the layer's `dtype` (float64 unless asked) and stay in it:
the operators keep their operands' dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dlperf.nn import operators as ops


class Layer:
    """A layer: `forward(x)` keeps what `backward(grad)` needs; parameters and their gradients by name."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.grads: dict[str, Any] = {}

    def forward(self, x: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement forward()")

    def backward(self, grad: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement backward()")


class Dense(Layer):
    """y = x @ W + b. He-normal initialisation (for ReLU nets)."""

    def __init__(self, n_in: int, n_out: int, rng: np.random.Generator, dtype: str = "float64") -> None:
        super().__init__()
        self.params = {"W": (rng.standard_normal((n_in, n_out)) * math.sqrt(2.0 / n_in)).astype(dtype),
                       "b": np.zeros(n_out, dtype=dtype)}

    def forward(self, x: Any) -> Any:
        self.x = x
        return ops.add(ops.matmul(x, self.params["W"]), self.params["b"])

    def backward(self, grad: Any) -> Any:
        self.grads = {"W": ops.matmul(ops.transpose(self.x), grad), "b": ops.sum(grad, 0)}
        return ops.matmul(grad, ops.transpose(self.params["W"]))


class Conv2D(Layer):
    """Cross-correlation over NCHW input with K filters of C x k x k, stride and zero padding, plus a bias."""

    def __init__(self, c_in: int, c_out: int, k: int, rng: np.random.Generator, stride: int = 1, pad: int = 0,
                 dtype: str = "float64"):
        super().__init__()
        self.stride, self.pad = stride, pad
        fan_in = c_in * k * k
        self.params = {"W": (rng.standard_normal((c_out, c_in, k, k)) * math.sqrt(2.0 / fan_in)).astype(dtype),
                       "b": np.zeros(c_out, dtype=dtype)}

    def forward(self, x: Any) -> Any:
        self.x = x
        y = ops.conv2d(x, self.params["W"], self.stride, self.pad)  # N K H W
        return ops.add(y.transpose(0, 2, 3, 1), self.params["b"]).transpose(0, 3, 1, 2)  # bias per channel

    def backward(self, grad: Any) -> Any:
        w = self.params["W"]
        self.grads = {"W": ops.conv2d_grad_weight(grad, self.x, w.shape, self.stride, self.pad),
                      "b": ops.sum(grad, (0, 2, 3))}
        return ops.conv2d_grad_input(grad, w, self.x.shape, self.stride, self.pad)


class MaxPool2D(Layer):
    def __init__(self, k: int, stride: int | None = None) -> None:
        super().__init__()
        self.k, self.stride = k, stride or k

    def forward(self, x: Any) -> Any:
        self.x_shape = x.shape
        out, self.arg = ops.maxpool2d(x, self.k, self.stride)
        return out

    def backward(self, grad: Any) -> Any:
        return ops.maxpool2d_grad(grad, self.arg, self.x_shape, self.k, self.stride)


class Flatten(Layer):
    def forward(self, x: Any) -> Any:
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, grad: Any) -> Any:
        return grad.reshape(self.shape)


class ReLU(Layer):
    def forward(self, x: Any) -> Any:
        self.x = x
        return ops.relu(x)

    def backward(self, grad: Any) -> Any:
        return ops.relu_grad(self.x, grad)


class Sigmoid(Layer):
    """s = 1 / (1 + exp(-x)); ds/dx = s (1 - s)."""

    def forward(self, x: Any) -> Any:
        self.s = ops.div(1.0, ops.add(ops.exp(ops.mul(x, -1.0)), 1.0))
        return self.s

    def backward(self, grad: Any) -> Any:
        return ops.mul(grad, ops.mul(self.s, ops.sub(1.0, self.s)))


class Tanh(Layer):
    """t = (e^x - e^-x) / (e^x + e^-x); dt/dx = 1 - t^2."""

    def forward(self, x: Any) -> Any:
        ex, emx = ops.exp(x), ops.exp(ops.mul(x, -1.0))
        self.t = ops.div(ops.sub(ex, emx), ops.add(ex, emx))
        return self.t

    def backward(self, grad: Any) -> Any:
        return ops.mul(grad, ops.sub(1.0, ops.mul(self.t, self.t)))
