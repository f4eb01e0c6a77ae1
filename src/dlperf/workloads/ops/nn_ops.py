"""The ops in dlperf.nn, through its operator table, on whichever backend the framework selected.

Arrays are made in the case's dtype and stay in it (the operators keep their
operands' dtype); a dtype the backend does not compute in is `unsupported`.
softmax is `unsupported`: dlperf.nn has no softmax primitive (it fuses softmax
into its cross-entropy), and a row max is not in its operator table; so is attention
(its softmax), and layernorm (its `sum` drops the axis, so a row mean cannot be
broadcast back). gelu is composed from the table, its tanh written with exp as tanh's is.
"""

from __future__ import annotations

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import GELU_C, SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    fw.import_module()  # selects the backend
    from dlperf.nn import operators as ops

    fw.check_dtype(dtype)  # type: ignore[attr-defined]
    if op in ("softmax", "attention"):
        raise UnsupportedError(f"dlperf.nn has no softmax primitive (softmax is fused into its cross-entropy)"
                               f"{', which attention needs' if op == 'attention' else ''}")
    if op == "layernorm":
        raise UnsupportedError("dlperf.nn has no row mean that broadcasts back (its sum drops the axis), "
                               "which layernorm needs")
    b = ops.backend()
    x = {k: b.asarray(v.astype(dtype)) for k, v in inputs.items()}
    a = x["a"]
    kept: list[object] = [None]

    def tanh(u: object) -> object:
        e, e_neg = ops.exp(u), ops.exp(ops.mul(u, -1.0))
        return ops.div(ops.sub(e, e_neg), ops.add(e, e_neg))

    def gelu() -> object:
        inner = ops.mul(ops.add(a, ops.mul(ops.mul(ops.mul(a, a), a), 0.044715)), GELU_C)
        return ops.mul(ops.mul(a, 0.5), ops.add(tanh(inner), 1.0))

    fns = {
        "add": lambda: ops.add(a, x["b"]),
        "mul": lambda: ops.mul(a, x["b"]),
        "scalar": lambda: ops.mul(a, SCALAR),
        "sigmoid": lambda: ops.div(1.0, ops.add(ops.exp(ops.mul(a, -1.0)), 1.0)),
        "tanh": lambda: ops.div(ops.sub(ops.exp(a), ops.exp(ops.mul(a, -1.0))),
                                ops.add(ops.exp(a), ops.exp(ops.mul(a, -1.0)))),
        "relu": lambda: ops.relu(a),
        "dot": lambda: ops.matmul(a, x["b"]),
        "conv2d": lambda: ops.conv2d(a, x["w"], 1, x["w"].shape[-1] // 2),
        "gelu": gelu,
    }
    op_fn = fns[op]

    def step() -> object:
        kept[0] = op_fn()
        return kept[0]

    def array_nbytes() -> dict[str, int]:  # the output exists once the step ran
        return {k: int(v.nbytes) for k, v in {**x, "out": kept[0]}.items()}

    return Step(step, lambda: np.asarray(b.to_numpy(kept[0]), dtype=np.float64), array_nbytes=array_nbytes)
