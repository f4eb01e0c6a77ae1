"""A sequential model, softmax cross-entropy, SGD with momentum, `fit` and `evaluate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlperf.nn import operators as ops
from dlperf.nn.layers import Layer


@dataclass
class History:
    loss: list[float] = field(default_factory=list)
    batches: int = 0


class SGD:
    """v = momentum * v - lr * grad; param += v."""

    def __init__(self, lr: float = 0.05, momentum: float = 0.9) -> None:
        self.lr, self.momentum = lr, momentum
        self.velocity: dict[tuple[int, str], Any] = {}

    def step(self, layers: list[Layer]) -> None:
        for i, layer in enumerate(layers):
            for name, grad in layer.grads.items():
                key = (i, name)
                v = self.velocity.get(key)
                step = ops.mul(grad, -self.lr)
                v = step if v is None else ops.add(ops.mul(v, self.momentum), step)
                self.velocity[key] = v
                layer.params[name] = ops.add(layer.params[name], v)


class Sequential:
    def __init__(self, layers: list[Layer]) -> None:
        self.layers = layers

    @property
    def dtype(self) -> np.dtype | None:
        """The parameters' dtype (the layers make them in one), or None for a model without parameters."""
        for layer in self.layers:
            for v in layer.params.values():
                return np.dtype(v.dtype)
        return None

    def _batch(self, X: np.ndarray) -> Any:
        """A batch in the current backend's arrays, in the parameters' dtype (so nothing widens a float32 model)."""
        dt = self.dtype
        return ops.backend().asarray(X if dt is None else np.asarray(X, dtype=dt))

    def to_backend(self) -> None:
        """Move parameters into the current backend's arrays (a no-op between the NumPy-based ones)."""
        b = ops.backend()
        for layer in self.layers:
            # a CuPy array's host copy is .get(); anything else is already host memory
            layer.params = {k: b.asarray(v.get() if hasattr(v, "get") else v) for k, v in layer.params.items()}

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def backward(self, grad: Any) -> None:
        for layer in reversed(self.layers):
            grad = layer.backward(grad)

    def train_step(self, x: Any, y: np.ndarray, opt: SGD) -> float:
        loss, grad = ops.softmax_cross_entropy(self.forward(x), y)
        self.backward(grad)
        opt.step(self.layers)
        return float(loss)

    def fit(self, X: np.ndarray, y: np.ndarray, *, epochs: int = 10, batch_size: int = 32, lr: float = 0.05,
            momentum: float = 0.9, seed: int = 0, max_batches: int | None = None) -> History:
        """Mini-batch SGD; `max_batches` stops early (the sequential backend measures on fewer batches)."""
        self.to_backend()
        opt = SGD(lr, momentum)
        rng = np.random.default_rng(seed)
        hist = History()
        for _ in range(epochs):
            order = rng.permutation(len(X))
            for start in range(0, len(X), batch_size):
                if max_batches is not None and hist.batches >= max_batches:
                    return hist
                idx = order[start:start + batch_size]
                hist.loss.append(self.train_step(self._batch(X[idx]), y[idx], opt))
                hist.batches += 1
        return hist

    def predict(self, X: np.ndarray, batch_size: int = 256) -> np.ndarray:
        b = ops.backend()
        out = [np.asarray(b.to_numpy(self.forward(self._batch(X[i:i + batch_size])))).argmax(axis=1)
               for i in range(0, len(X), batch_size)]
        return np.concatenate(out)

    def evaluate(self, X: np.ndarray, y: np.ndarray) -> float:
        """Accuracy in [0, 1]."""
        return float((self.predict(X) == y).mean())
