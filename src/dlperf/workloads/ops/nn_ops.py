"""The ops in dlperf.nn, through its operator table, on whichever backend the framework selected.

softmax is `unsupported`: dlperf.nn has no softmax primitive (it fuses softmax
into its cross-entropy), and a row max is not in its operator table.
"""

from __future__ import annotations

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    fw.import_module()  # selects the backend
    from dlperf.nn import operators as ops

    if dtype != "float64" and dtype != "float32":
        raise UnsupportedError(f"{fw.name} computes in float32/float64 only")
    if op == "softmax":
        raise UnsupportedError("dlperf.nn has no softmax primitive (softmax is fused into its cross-entropy)")
    b = ops.backend()
    x = {k: b.asarray(v.astype(np.float64)) for k, v in inputs.items()}
    a = x["a"]
    kept: list[object] = [None]
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
    }
    op_fn = fns[op]

    def step() -> object:
        kept[0] = op_fn()
        return kept[0]

    return Step(step, lambda: np.asarray(b.to_numpy(kept[0]), dtype=np.float64))
