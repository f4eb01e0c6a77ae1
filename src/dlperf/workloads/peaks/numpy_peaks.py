"""Peaks in NumPy: matmul and copy into kept buffers; triad in two passes (NumPy has no fused triad)."""

from __future__ import annotations

import numpy as np

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.peaks import TRIAD_SCALAR, PeaksParams, inputs


def build(fw: Framework, device: str, p: PeaksParams) -> Step:
    x = inputs(p)
    a, b = x["a"], x["b"]
    if p.kind == "gemm":
        c = x["c"]
        return Step(lambda: np.matmul(a, b, out=c))
    if p.kind == "copy":
        return Step(lambda: np.copyto(b, a))
    c = x["c"]

    def triad() -> None:
        np.multiply(c, TRIAD_SCALAR, out=a)
        np.add(a, b, out=a)

    return Step(triad)
