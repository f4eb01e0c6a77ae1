"""The ops in NumPy, or CuPy on a GPU (same API), writing into a kept output buffer (`out=`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import SCALAR, conv2d_nchw


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    xp = fw.import_module()  # numpy, or cupy
    if dtype == "bfloat16":
        raise UnsupportedError(f"{fw.name} has no bfloat16")
    if op == "conv2d" and xp is not np:
        raise UnsupportedError(f"{fw.name} has no conv2d (dlperf's NumPy conv2d uses einsum on a window view)")
    if xp is not np:
        xp.cuda.Device(int(device.partition(":")[2] or 0)).use()
    x = {k: xp.asarray(v.astype(dtype)) for k, v in inputs.items()}
    a = x["a"]
    b = x.get("b")
    out = xp.empty((a.shape[0], x["b"].shape[1]) if op == "dot" else a.shape, dtype=dtype)
    to_numpy = getattr(xp, "asnumpy", np.asarray)
    kept: list[Any] = [out]

    def sigmoid() -> None:  # NumPy has no fused sigmoid: four passes, as a NumPy user would write it
        xp.negative(a, out=out)
        xp.exp(out, out=out)
        xp.add(out, 1, out=out)
        xp.reciprocal(out, out=out)

    def softmax() -> None:
        xp.subtract(a, a.max(axis=1, keepdims=True), out=out)
        xp.exp(out, out=out)
        xp.divide(out, out.sum(axis=1, keepdims=True), out=out)

    def conv2d() -> None:
        kept[0] = conv2d_nchw(a, x["w"])

    fns = {
        "add": lambda: xp.add(a, b, out=out),
        "mul": lambda: xp.multiply(a, b, out=out),
        "scalar": lambda: xp.multiply(a, SCALAR, out=out),
        "sigmoid": sigmoid,
        "tanh": lambda: xp.tanh(a, out=out),
        "relu": lambda: xp.maximum(a, 0, out=out),
        "softmax": softmax,
        "dot": lambda: xp.matmul(a, b, out=out),
        "conv2d": conv2d,
    }
    def array_nbytes() -> dict[str, int]:
        return {**{k: int(v.nbytes) for k, v in x.items()}, "out": int(kept[0].nbytes)}

    return Step(fns[op], lambda: np.asarray(to_numpy(kept[0]), dtype=np.float64), array_nbytes=array_nbytes)
