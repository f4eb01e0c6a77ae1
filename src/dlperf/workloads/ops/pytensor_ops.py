"""The ops in PyTensor (or Theano): a compiled function that writes its result into a shared variable.

`updates` keeps the output where it is computed, so no copy to the caller is
timed. PyTensor 3 has no 2-D convolution op: conv2d is `unsupported` there.
"""

from __future__ import annotations

import warnings

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    if dtype == "bfloat16":
        raise UnsupportedError(f"{fw.name} has no bfloat16")
    mod = fw.import_module()
    if dtype == "float16" and mod.__name__ == "pytensor":  # seen: its numba linker fails on float16 code
        raise UnsupportedError(f"{fw.name} {mod.__version__}'s default (numba) linker cannot compile float16 ops")
    T = mod.tensor
    if op == "conv2d":
        raise UnsupportedError(f"{fw.name} {mod.__version__} has no 2-D convolution op")
    x = {k: mod.shared(v.astype(dtype), name=k) for k, v in inputs.items()}
    a, b = x["a"], x.get("b")
    special = getattr(T, "special", None)
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
    }
    expr = exprs[op]()
    out = mod.shared(np.zeros(inputs["a"].shape[:1] + (inputs["b"].shape[1],) if op == "dot"
                              else inputs["a"].shape, dtype=dtype), name="out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "could not link to a BLAS": recorded in the fingerprint
        fn = mod.function([], [], updates=[(out, expr.astype(dtype))])

    def array_nbytes() -> dict[str, int]:
        return {k: int(v.get_value(borrow=True).nbytes) for k, v in {**x, "out": out}.items()}

    return Step(fn, lambda: np.asarray(out.get_value(), dtype=np.float64), array_nbytes=array_nbytes)
