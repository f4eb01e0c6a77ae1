"""The ops in NumPy, writing into a kept output buffer where NumPy allows (`out=`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops.spec import SCALAR, conv2d_nchw


def build(fw: Framework, device: str, op: str, dtype: str, inputs: dict[str, np.ndarray]) -> Step:
    if dtype == "bfloat16":
        raise UnsupportedError("NumPy has no bfloat16")
    x = {k: v.astype(dtype) for k, v in inputs.items()}
    a = x["a"]
    b = x.get("b")
    out = np.empty((a.shape[0], x["b"].shape[1]) if op == "dot" else a.shape, dtype=dtype)
    kept: list[Any] = [out]

    def sigmoid() -> None:  # NumPy has no fused sigmoid: four passes, as a NumPy user would write it
        np.negative(a, out=out)
        np.exp(out, out=out)
        np.add(out, 1, out=out)
        np.reciprocal(out, out=out)

    def softmax() -> None:
        np.subtract(a, a.max(axis=1, keepdims=True), out=out)
        np.exp(out, out=out)
        np.divide(out, out.sum(axis=1, keepdims=True), out=out)

    def conv2d() -> None:
        kept[0] = conv2d_nchw(a, x["w"])

    fns = {
        "add": lambda: np.add(a, b, out=out),
        "mul": lambda: np.multiply(a, b, out=out),
        "scalar": lambda: np.multiply(a, SCALAR, out=out),
        "sigmoid": sigmoid,
        "tanh": lambda: np.tanh(a, out=out),
        "relu": lambda: np.maximum(a, 0, out=out),
        "softmax": softmax,
        "dot": lambda: np.matmul(a, b, out=out),
        "conv2d": conv2d,
    }
    return Step(fns[op], lambda: np.asarray(kept[0], dtype=np.float64))
