"""Shapes, inputs, reference outputs and cost models of the `ops` workload (framework-free).

Working set. `size_mb` is the study's "MB": the bytes of every array an op
touches, inputs and output together (MiB, 2**20 bytes). Binary element-wise ops
(add, mul) and dot use three arrays; unary ones (scalar, sigmoid, tanh, relu,
softmax) two; conv2d its input, output and filters.

Counting convention (FLOPs per call):
- every add, subtract, multiply, divide, max/compare, and every exp counts as one
  FLOP. A transcendental is one operation of the formula, not the instruction
  sequence a GPU runs for it (hardware counters count those: `--counters`).
- add, mul, scalar (s*A), relu (max(a, 0)): 1 per element.
- sigmoid 1/(1+exp(-a)), as study 002 writes it: negate, exp, add, divide = 4.
- tanh (e^a - e^-a)/(e^a + e^-a), as study 002 writes it: negate, two exp,
  subtract, add, divide = 6.
- softmax along rows: max-compare, subtract, exp, sum-add, divide = 5 per element.
- dot, C = A @ B with n x n matrices: 2 n^3 (one multiply and one add per term).
- conv2d, stride 1, "same" padding: 2 x N x K x H x W x C x R x S.
Bytes moved are the compulsory traffic: each array read or written once
(caches, write-allocate and re-reads are not counted), so arithmetic intensity
is FLOPs / bytes of that ideal.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dlperf.workloads.base import Cost

STUDY_OPS = ("add", "mul", "scalar", "sigmoid", "tanh", "dot")
OPS = (*STUDY_OPS, "relu", "softmax", "conv2d")
ELEMENTWISE_BINARY = ("add", "mul")
ELEMENTWISE_UNARY = ("scalar", "sigmoid", "tanh", "relu")
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
FLOPS_PER_ELEMENT = {"add": 1, "mul": 1, "scalar": 1, "relu": 1, "sigmoid": 4, "tanh": 6, "softmax": 5}
#: The scalar of `scalar` (s * A).
SCALAR = 0.5
SOFTMAX_COLS = 1024
CONV = {"batch": 8, "channels": 64, "filters": 64, "kernel": 3}


def shape_for(op: str, size_mb: float, dtype: str) -> dict[str, int]:
    """The array dimensions that give `size_mb` MiB of working set."""
    nbytes = size_mb * 2**20
    item = ITEMSIZE[dtype]
    if op in ELEMENTWISE_BINARY:
        return {"n": max(1, int(nbytes // (3 * item)))}
    if op in ELEMENTWISE_UNARY:
        return {"n": max(1, int(nbytes // (2 * item)))}
    if op == "softmax":
        return {"rows": max(1, int(nbytes // (2 * item * SOFTMAX_COLS))), "cols": SOFTMAX_COLS}
    if op == "dot":
        return {"n": max(1, math.isqrt(int(nbytes // (3 * item))))}
    if op == "conv2d":
        c = CONV
        filters_bytes = c["filters"] * c["channels"] * c["kernel"] ** 2 * item
        per_pixel = (c["batch"] * c["channels"] + c["batch"] * c["filters"]) * item
        hw = max(c["kernel"], math.isqrt(int(max(nbytes - filters_bytes, 0) // per_pixel)))
        return {**c, "hw": hw}
    raise ValueError(f"unknown op {op!r}")


def make_inputs(op: str, shape: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded float32 inputs, the same for every framework (each casts to its dtype).

    Drawn in float32 directly: no float64 temporary twice their size, which would make a float32 case need more
    memory than its arrays and its out-of-memory reason name float64."""
    rng = np.random.default_rng(seed)

    def normal(*dims: int) -> np.ndarray:
        return rng.standard_normal(dims, dtype=np.float32)

    if op == "dot":
        n = shape["n"]
        scale = np.float32(1.0 / math.sqrt(n))  # keeps |C| ~ 1, so fp16 does not overflow
        a = normal(n, n)
        a *= scale
        return {"a": a, "b": normal(n, n)}
    if op == "conv2d":
        n, c, k, r, hw = shape["batch"], shape["channels"], shape["filters"], shape["kernel"], shape["hw"]
        w = normal(k, c, r, r)
        w /= np.float32(math.sqrt(c * r * r))
        return {"a": normal(n, c, hw, hw), "w": w}
    dims = (shape["rows"], shape["cols"]) if op == "softmax" else (shape["n"],)
    out = {"a": normal(*dims)}
    if op in ELEMENTWISE_BINARY:
        out["b"] = normal(*dims)
    return out


def conv2d_nchw(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Stride-1 'same' cross-correlation (what every framework calls conv2d), NCHW x KCRS -> NKHW."""
    r = w.shape[2]
    pad = r // 2
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (r, r), axis=(2, 3))  # N C H W R S
    return np.einsum("nchwrs,kcrs->nkhw", windows, w, optimize=True)


def reference(op: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The op in float64 NumPy: what every framework's output is checked against."""
    a = inputs["a"].astype(np.float64)
    if op == "add":
        return a + inputs["b"]
    if op == "mul":
        return a * inputs["b"]
    if op == "scalar":
        return SCALAR * a
    if op == "sigmoid":
        return 1.0 / (1.0 + np.exp(-a))
    if op == "tanh":
        return np.tanh(a)
    if op == "relu":
        return np.maximum(a, 0.0)
    if op == "softmax":
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if op == "dot":
        return a @ inputs["b"].astype(np.float64)
    if op == "conv2d":
        return conv2d_nchw(a, inputs["w"].astype(np.float64))
    raise ValueError(f"unknown op {op!r}")


def cost(op: str, shape: dict[str, int], dtype: str) -> Cost:
    """FLOPs and compulsory bytes of one call, by the convention in this module's docstring."""
    item = ITEMSIZE[dtype]
    if op in FLOPS_PER_ELEMENT:
        n = shape["rows"] * shape["cols"] if op == "softmax" else shape["n"]
        arrays = 3 if op in ELEMENTWISE_BINARY else 2
        return Cost(flops=float(FLOPS_PER_ELEMENT[op] * n), bytes_moved=float(arrays * n * item))
    if op == "dot":
        n = shape["n"]
        return Cost(flops=2.0 * n**3, bytes_moved=3.0 * n * n * item)
    if op == "conv2d":
        nb, c, k, r, hw = shape["batch"], shape["channels"], shape["filters"], shape["kernel"], shape["hw"]
        flops = 2.0 * nb * k * hw * hw * c * r * r
        elems = nb * c * hw * hw + k * c * r * r + nb * k * hw * hw
        return Cost(flops=flops, bytes_moved=float(elems * item))
    raise ValueError(f"unknown op {op!r}")


def describe(shape: dict[str, Any]) -> str:
    return "x".join(str(v) for v in shape.values())
