"""The two-layer net of study 000: sizes (its Table 1), seeded initial state, and the cost model.

One training iteration: h = x @ w1; a = relu(h); y_pred = a @ w2;
loss = sum((y_pred - y)^2); backward; w -= lr * grad, for both weights.

Initial weights are scaled by 1/sqrt(fan_in): with the tutorial's plain randn
weights and lr = 1e-6 the loss overflows to NaN at the small and medium sizes
within a few iterations (seen on this machine), and a diverged run times NaN
arithmetic, not the net.

Counting convention, FLOPs per iteration (N batch, D = D_in, H hidden, O = D_out):
- matrix products: forward 2NDH + 2NHO; backward grad_w2 = a^T g (2NHO),
  g @ w2^T (2NOH), grad_w1 = x^T g_h (2NDH): 4NDH + 6NHO in all (this part is
  checked against torch's FlopCounterMode);
- element-wise: relu and its mask NH each; loss: subtract, square, sum (3NO);
  grad of the loss (x2, NO); SGD: multiply and subtract per weight 2(DH + HO).
Bytes: compulsory traffic only: x and y read once, both weights read and written
once; activations are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlperf.models.mlp_sizes import SIZES  # study 000's Table 1, shared with the dlperf: sources
from dlperf.workloads.base import Cost

__all__ = ["SIZES", "Dims", "cost", "initial_state", "matmul_flops"]


@dataclass(frozen=True)
class Dims:
    n: int
    d_in: int
    h: int
    d_out: int


def matmul_flops(d: Dims) -> float:
    return 4.0 * d.n * d.d_in * d.h + 6.0 * d.n * d.h * d.d_out


def cost(d: Dims, itemsize: int) -> Cost:
    elementwise = 2 * d.n * d.h + 4 * d.n * d.d_out + 2 * (d.d_in * d.h + d.h * d.d_out)
    nbytes = (d.n * d.d_in + d.n * d.d_out + 2 * (d.d_in * d.h + d.h * d.d_out)) * itemsize
    return Cost(flops=matmul_flops(d) + elementwise, bytes_moved=float(nbytes), samples=d.n)


def initial_state(d: Dims, seed: int = 0) -> dict[str, np.ndarray]:
    """x, y, w1, w2 in float64 from one seed: the same start for every framework and variant."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((d.n, d.d_in)),
        "y": rng.standard_normal((d.n, d.d_out)),
        "w1": rng.standard_normal((d.d_in, d.h)) / math.sqrt(d.d_in),
        "w2": rng.standard_normal((d.h, d.d_out)) / math.sqrt(d.h),
    }
