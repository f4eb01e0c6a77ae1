"""`peaks`: what this machine achieves: a large GEMM and STREAM-like copy and triad.

Counting (STREAM's convention, so figures compare with STREAM's):
(TensorFlow's copy is `DeepCopy`, which allocates its output on every call: the
only TF op found here that is not turned into an alias of its input.)
- gemm: C = A @ B, n x n: 2 n^3 FLOPs, 3 n^2 x itemsize bytes.
- copy: b = a over N elements: 0 FLOPs, 2 N x itemsize bytes (read a, write b).
- triad: a = b + s * c: 2 N FLOPs, 3 N x itemsize bytes.
NumPy has no fused triad: it runs two passes (s * c, then + b), so its triad
figure is lower than a one-pass triad would reach; bytes are still counted as
STREAM does. `size_mb` is the working set of all arrays, MiB; for bandwidth it
should exceed the last-level cache several times over.

The builders are the `<family>_peaks` modules beside this one.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from dlperf.workloads.base import Cost, Workload, WorkloadParams

TRIAD_SCALAR = 3.0


class PeaksParams(WorkloadParams):
    kind: Literal["gemm", "copy", "triad"]
    size_mb: float = Field(gt=0, le=65536)
    dtype: Literal["float32"] = "float32"


def elements(p: PeaksParams) -> int:
    """n of the n x n GEMM, or the length of each STREAM array."""
    arrays = {"gemm": 3, "copy": 2, "triad": 3}[p.kind]
    n = int(p.size_mb * 2**20 // (arrays * 4))
    return max(1, math.isqrt(n)) if p.kind == "gemm" else max(1, n)


def inputs(p: PeaksParams) -> dict[str, np.ndarray]:
    """Seeded float32 arrays a, b (and c, except for copy), the same for every framework."""
    n = elements(p)
    rng = np.random.default_rng(0)
    shape = (n, n) if p.kind == "gemm" else (n,)
    names = ("a", "b") if p.kind == "copy" else ("a", "b", "c")
    return {k: rng.standard_normal(shape, dtype=np.float32) for k in names}


class Peaks(Workload[PeaksParams]):
    name = "peaks"
    description = "achievable peaks: large GEMM, STREAM-like copy and triad"
    Params = PeaksParams
    #: Not offered as tensorflow-eager: its TensorFlow builder always compiles with tf.function; nor as the compiler
    #: modes tensorflow-xla and jax-nojit: a peak is the hardware's figure, one kernel whichever compiler calls it.
    excluded_frameworks = frozenset({"tensorflow-eager", "tensorflow-xla", "jax-nojit"})

    def cost(self, params: PeaksParams) -> Cost:
        n = elements(params)
        if params.kind == "gemm":
            return Cost(flops=2.0 * n**3, bytes_moved=3.0 * n * n * 4)
        if params.kind == "copy":
            return Cost(flops=0.0, bytes_moved=2.0 * n * 4)
        return Cost(flops=2.0 * n, bytes_moved=3.0 * n * 4)
