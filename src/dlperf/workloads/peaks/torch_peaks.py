"""Peaks in PyTorch: each step writes into a kept tensor (`out=`, `copy_`)."""

from __future__ import annotations

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.peaks import TRIAD_SCALAR, PeaksParams, inputs


def build(fw: Framework, device: str, p: PeaksParams) -> Step:
    torch = fw.import_module()
    x = {k: torch.from_numpy(v).to(device) for k, v in inputs(p).items()}
    a, b = x["a"], x["b"]
    if p.kind == "gemm":
        return Step(lambda: torch.matmul(a, b, out=x["c"]))
    if p.kind == "copy":
        return Step(lambda: b.copy_(a))
    return Step(lambda: torch.add(b, x["c"], alpha=TRIAD_SCALAR, out=a))
