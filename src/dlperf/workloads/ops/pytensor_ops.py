"""The ops in PyTensor (or Theano): a compiled function that writes its result into a shared variable.

`updates` keeps the output where it is computed, so no copy to the caller is
timed. PyTensor 3 has no 2-D convolution op: conv2d is `unsupported` there.
attention is written out (batched matmul, scale, mask, softmax, matmul), as are layernorm and the
tanh-approximate gelu; Theano (no softmax axis, no batched matmul) does not run attention.
"""

from __future__ import annotations

import warnings

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import GELU_C, LAYERNORM_EPS, SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    if dtype == "bfloat16":
        raise UnsupportedError(f"{fw.name} has no bfloat16")
    mod = fw.import_module()
    if dtype == "float16" and mod.__name__ == "pytensor":  # seen: its numba linker fails on float16 code
        raise UnsupportedError(f"{fw.name} {mod.__version__}'s default (numba) linker cannot compile float16 ops")
    T = mod.tensor
    if op == "conv2d":
        raise UnsupportedError(f"{fw.name} {mod.__version__} has no 2-D convolution op")
    special = getattr(T, "special", None)
    if op == "attention" and special is None:
        raise UnsupportedError(f"{fw.name} {mod.__version__} has no softmax along an axis of a 4-D tensor")
    x = {k: mod.shared(v.astype(dtype), name=k) for k, v in inputs.items()}
    a, b = x.get("a"), x.get("b")

    def c(value: float) -> np.ndarray:  # a constant in the case's dtype (a Python float would widen float32)
        return np.asarray(value, dtype=dtype)

    def attention() -> object:
        q, k, v = x["q"], x["k"], x["v"]
        t, d = inputs["q"].shape[-2:]
        scores = T.matmul(q, k.transpose(0, 1, 3, 2)) * c(1.0 / np.sqrt(d))
        if p.causal:
            scores = T.switch(np.tril(np.ones((t, t), dtype=bool)), scores, c(-np.inf))
        return T.matmul(special.softmax(scores, axis=-1), v)

    def layernorm() -> object:
        centred = a - a.mean(axis=-1, keepdims=True)
        var = T.sqr(centred).mean(axis=-1, keepdims=True)
        return centred / T.sqrt(var + c(LAYERNORM_EPS)) * x["g"] + b

    def gelu() -> object:
        return c(0.5) * a * (c(1.0) + T.tanh(c(GELU_C) * (a + c(0.044715) * a * a * a)))

    softmax = special.softmax if special is not None else T.nnet.softmax  # Theano: tensor.nnet
    sigmoid = getattr(T, "sigmoid", None) or T.nnet.sigmoid
    exprs = {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "scalar": lambda: np.asarray(SCALAR, dtype=dtype) * a,
        "sigmoid": lambda: sigmoid(a),
        "tanh": lambda: T.tanh(a),
        "relu": lambda: T.maximum(a, np.asarray(0, dtype=dtype)),
        "softmax": lambda: softmax(a, axis=1) if special is not None else softmax(a),
        "dot": lambda: T.dot(a, b),
        "attention": attention,
        "layernorm": layernorm,
        "gelu": gelu,
    }
    expr = exprs[op]()
    first = inputs["q" if op == "attention" else "a"]
    out = mod.shared(np.zeros(first.shape[:1] + (inputs["b"].shape[1],) if op == "dot" else first.shape,
                              dtype=dtype), name="out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "could not link to a BLAS": recorded in the fingerprint
        fn = mod.function([], [], updates=[(out, expr.astype(dtype))])

    def array_nbytes() -> dict[str, int]:
        return {k: int(v.get_value(borrow=True).nbytes) for k, v in {**x, "out": out}.items()}

    return Step(fn, lambda: np.asarray(out.get_value(), dtype=np.float64), array_nbytes=array_nbytes)
