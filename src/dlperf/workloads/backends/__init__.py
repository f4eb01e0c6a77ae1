"""`backends` (study 003): a training step of the digits MLP or CNN on each dlperf.nn backend, and in PyTorch.

One timed call is one training step (forward, softmax cross-entropy, backward,
SGD with momentum) on the next batch of the digits training set. Time per epoch
is derived from the per-step median (steps per epoch x median) and labelled as
derived: the sequential backend is timed on few steps, never a whole epoch.
`Step.profile` runs `fit` for a few batches, for the cProfile profile.

Cost convention: FLOPs of the matrix products and convolutions only, forward
plus the two backward products (input and weight gradients): 3 x forward.
Element-wise work (ReLU, pooling, loss, SGD) is not counted.

The builders are the `<family>_backends` modules beside this one.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import numpy as np
from pydantic import Field

from dlperf.workloads.base import Cost, Workload, WorkloadParams

MLP_SIZES = [64, 128, 10]
CNN_CHANNELS = 8
PROFILE_BATCHES = 3


class BackendsParams(WorkloadParams):
    model: Literal["mlp", "cnn"]
    batch_size: int = Field(default=32, gt=0)
    seed: int = 0


def data(p: BackendsParams) -> tuple[np.ndarray, np.ndarray]:
    """The digits training split (images for the CNN, flat rows for the MLP) and its labels."""
    return _digits_train(p.model == "cnn", p.seed)


@cache
def _digits_train(image: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training split, loaded once per worker (build and steps_per_epoch both need it); read-only."""
    from dlperf.nn.data import digits

    x_train, _, y_train, _ = digits(image=image, seed=seed)
    return x_train, y_train


class Backends(Workload[BackendsParams]):
    name = "backends"
    description = "study 003: a digits MLP/CNN training step on each dlperf.nn backend and in PyTorch"
    Params = BackendsParams

    def cost(self, params: BackendsParams) -> Cost:
        b = params.batch_size
        if params.model == "mlp":
            fwd = sum(2 * b * a * c for a, c in zip(MLP_SIZES, MLP_SIZES[1:], strict=False))
        else:
            conv = 2 * b * CNN_CHANNELS * 8 * 8 * 1 * 3 * 3
            dense = 2 * b * CNN_CHANNELS * 4 * 4 * 10
            fwd = conv + dense
        return Cost(flops=3.0 * fwd, bytes_moved=None, samples=b)

    def steps_per_epoch(self, params: BackendsParams) -> int:
        n = len(data(params)[1])
        return -(-n // params.batch_size)
