"""The ops in NumPy, or CuPy on a GPU (same API), writing into a kept output buffer (`out=`).

Attention materialises the B H T T scores in a buffer made once (outside timing), scales, masks and
normalises them in place, then multiplies by v into the output: the math backend, the only one NumPy has.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import GELU_C, LAYERNORM_EPS, SCALAR, TRANSFORMER_OPS, conv2d_nchw


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    xp = fw.import_module()  # numpy, or cupy
    if dtype == "bfloat16":
        raise UnsupportedError(f"{fw.name} has no bfloat16")
    if op == "conv2d" and xp is not np:
        raise UnsupportedError(f"{fw.name} has no conv2d (dlperf's NumPy conv2d uses einsum on a window view)")
    if xp is not np:
        xp.cuda.Device(int(device.partition(":")[2] or 0)).use()
    x = {k: xp.asarray(v.astype(dtype)) for k, v in inputs.items()}
    to_numpy = getattr(xp, "asnumpy", np.asarray)
    if op in TRANSFORMER_OPS:
        out = xp.empty(x["q" if op == "attention" else "a"].shape, dtype=dtype)
        return Step(_transformer_fn(xp, op, x, out, bool(p.causal)), lambda: np.asarray(to_numpy(out), np.float64),
                    array_nbytes=lambda: {**{k: int(v.nbytes) for k, v in x.items()}, "out": int(out.nbytes)})
    a = x["a"]
    b = x.get("b")
    out = xp.empty((a.shape[0], x["b"].shape[1]) if op == "dot" else a.shape, dtype=dtype)
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


def _transformer_fn(xp: Any, op: str, x: dict[str, Any], out: Any, causal: bool) -> Any:
    """The step of a transformer op, writing into `out` (its temporaries: attention's scores, per-row stats)."""
    if op == "attention":
        q, k, v = x["q"], x["k"], x["v"]
        t, d = q.shape[-2], q.shape[-1]
        scores = xp.empty((*q.shape[:-1], t), dtype=q.dtype)
        kt = k.swapaxes(-1, -2)
        masked = xp.asarray(np.triu(np.ones((t, t), dtype=bool), 1)) if causal else None
        scale = 1.0 / float(np.sqrt(d))

        def attention() -> None:
            xp.matmul(q, kt, out=scores)
            xp.multiply(scores, scale, out=scores)
            if masked is not None:
                xp.copyto(scores, -np.inf, where=masked)
            xp.subtract(scores, scores.max(axis=-1, keepdims=True), out=scores)
            xp.exp(scores, out=scores)
            xp.divide(scores, scores.sum(axis=-1, keepdims=True), out=scores)
            xp.matmul(scores, v, out=out)

        return attention
    a = x["a"]
    if op == "layernorm":
        g, b = x["g"], x["b"]

        def layernorm() -> None:
            xp.subtract(a, a.mean(axis=-1, keepdims=True), out=out)
            var = xp.square(out).mean(axis=-1, keepdims=True)
            xp.divide(out, xp.sqrt(var + LAYERNORM_EPS), out=out)
            xp.multiply(out, g, out=out)
            xp.add(out, b, out=out)

        return layernorm

    def gelu() -> None:  # 0.5 a (1 + tanh(c (a + 0.044715 a^3))), step by step in the output buffer
        xp.multiply(a, a, out=out)
        xp.multiply(out, a, out=out)
        xp.multiply(out, 0.044715, out=out)
        xp.add(out, a, out=out)
        xp.multiply(out, GELU_C, out=out)
        xp.tanh(out, out=out)
        xp.add(out, 1.0, out=out)
        xp.multiply(out, a, out=out)
        xp.multiply(out, 0.5, out=out)

    return gelu
