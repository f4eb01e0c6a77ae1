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
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from dlperf.frameworks import Framework
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams

TRIAD_SCALAR = 3.0


class PeaksParams(WorkloadParams):
    kind: Literal["gemm", "copy", "triad"]
    size_mb: float = Field(gt=0, le=65536)
    dtype: Literal["float32"] = "float32"


def _elements(p: PeaksParams) -> int:
    arrays = {"gemm": 3, "copy": 2, "triad": 3}[p.kind]
    n = int(p.size_mb * 2**20 // (arrays * 4))
    return max(1, math.isqrt(n)) if p.kind == "gemm" else max(1, n)


class Peaks(Workload):
    name = "peaks"
    description = "achievable peaks: large GEMM, STREAM-like copy and triad"
    Params = PeaksParams

    def cost(self, params: PeaksParams) -> Cost:  # type: ignore[override]
        n = _elements(params)
        if params.kind == "gemm":
            return Cost(flops=2.0 * n**3, bytes_moved=3.0 * n * n * 4)
        if params.kind == "copy":
            return Cost(flops=0.0, bytes_moved=2.0 * n * 4)
        return Cost(flops=2.0 * n, bytes_moved=3.0 * n * 4)

    def _inputs(self, p: PeaksParams) -> dict[str, np.ndarray]:
        n = _elements(p)
        rng = np.random.default_rng(0)
        shape = (n, n) if p.kind == "gemm" else (n,)
        names = ("a", "b") if p.kind == "copy" else ("a", "b", "c")
        return {k: rng.standard_normal(shape, dtype=np.float32) for k in names}

    def build_numpy(self, fw: Framework, device: str, p: PeaksParams) -> Step:
        x = self._inputs(p)
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

    def build_torch(self, fw: Framework, device: str, p: PeaksParams) -> Step:
        torch = fw.import_module()
        x = {k: torch.from_numpy(v).to(device) for k, v in self._inputs(p).items()}
        a, b = x["a"], x["b"]
        if p.kind == "gemm":
            return Step(lambda: torch.matmul(a, b, out=x["c"]))
        if p.kind == "copy":
            return Step(lambda: b.copy_(a))
        return Step(lambda: torch.add(b, x["c"], alpha=TRIAD_SCALAR, out=a))

    def build_jax(self, fw: Framework, device: str, p: PeaksParams) -> Step:
        jax = fw.import_module()
        dev = fw.jax_device(device)  # type: ignore[attr-defined]
        x = {k: jax.device_put(v, dev) for k, v in self._inputs(p).items()}
        if p.kind == "gemm":
            f = jax.jit(jax.numpy.matmul)
            return Step(lambda: f(x["a"], x["b"]))
        if p.kind == "copy":
            f = jax.jit(lambda a: a + 0.0)  # a copy XLA cannot elide: it must write a new buffer
            return Step(lambda: f(x["a"]))
        f = jax.jit(lambda b, c: b + TRIAD_SCALAR * c)
        return Step(lambda: f(x["b"], x["c"]))

    def build_tensorflow(self, fw: Framework, device: str, p: PeaksParams) -> Step:
        tf = fw.import_module()
        from dlperf.frameworks.tensorflow_fw import tf_device

        dev = tf_device(device)
        with tf.device(dev):
            x = {k: tf.Variable(v, trainable=False) for k, v in self._inputs(p).items()}
            if p.kind == "gemm":
                f = tf.function(lambda: tf.matmul(x["a"], x["b"]))
            elif p.kind == "copy":
                # identity, assign and `+ 0` all alias the buffer (seen: "copies" at 2.7 TB/s);
                # DeepCopy really copies, into a buffer it allocates each call.
                f = tf.function(lambda: tf.raw_ops.DeepCopy(x=x["a"].read_value()))
            else:
                f = tf.function(lambda: x["b"] + TRIAD_SCALAR * x["c"])

        def step() -> object:
            with tf.device(dev):
                return f()

        return Step(step)
