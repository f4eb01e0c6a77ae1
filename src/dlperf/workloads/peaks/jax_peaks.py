"""Peaks in JAX: jitted functions, each returning a new buffer."""

from __future__ import annotations

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.peaks import TRIAD_SCALAR, PeaksParams, inputs


def build(fw: Framework, device: str, p: PeaksParams) -> Step:
    jax = fw.import_module()
    dev = fw.jax_device(device)  # type: ignore[attr-defined]
    x = {k: jax.device_put(v, dev) for k, v in inputs(p).items()}
    if p.kind == "gemm":
        f = jax.jit(jax.numpy.matmul)
        return Step(lambda: f(x["a"], x["b"]))
    if p.kind == "copy":
        f = jax.jit(lambda a: a + 0.0)  # a copy XLA cannot elide: it must write a new buffer
        return Step(lambda: f(x["a"]))
    f = jax.jit(lambda b, c: b + TRIAD_SCALAR * c)
    return Step(lambda: f(x["b"], x["c"]))
