"""dlperf.nn: a small teaching framework (study 003) whose operators switch backend at run time.

    from dlperf import nn
    from dlperf.nn import operators as ops
    model = nn.mlp([64, 128, 10], seed=0)
    with ops.Device("vectorized"):
        model.fit(X, y, epochs=20)
"""

from __future__ import annotations

import numpy as np

from dlperf.nn.layers import Conv2D, Dense, Flatten, Layer, MaxPool2D, ReLU, Sigmoid, Tanh
from dlperf.nn.model import SGD, Sequential


def mlp(sizes: list[int], seed: int = 0, dtype: str = "float64") -> Sequential:
    """Dense-ReLU-...-Dense for the given layer sizes, parameters in `dtype`."""
    rng = np.random.default_rng(seed)
    layers: list[Layer] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:], strict=False)):
        layers.append(Dense(a, b, rng, dtype))
        if i < len(sizes) - 2:
            layers.append(ReLU())
    return Sequential(layers)


def cnn(seed: int = 0, channels: int = 8, classes: int = 10, dtype: str = "float64") -> Sequential:
    """For 1x8x8 digits: conv 3x3 (pad 1) - ReLU - maxpool 2 - flatten - dense, parameters in `dtype`."""
    rng = np.random.default_rng(seed)
    return Sequential([Conv2D(1, channels, 3, rng, pad=1, dtype=dtype), ReLU(), MaxPool2D(2), Flatten(),
                       Dense(channels * 4 * 4, classes, rng, dtype)])


__all__ = ["SGD", "Conv2D", "Dense", "Flatten", "MaxPool2D", "ReLU", "Sequential", "Sigmoid", "Tanh", "cnn", "mlp"]
