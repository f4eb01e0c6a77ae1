"""The ops as ONNX graphs, for the inference runtimes' builders (`onnxruntime_ops`, `openvino_ops`).

Each op is the one ONNX operator that is that op (opset 23, the first with `Attention`): Add, Mul, Mul by a
scalar constant, Sigmoid, Tanh, Relu, Softmax (axis 1), MatMul, Conv (stride 1, "same" padding),
LayerNormalization (last axis, eps 1e-5), Gelu (approximate "tanh", opset 20+), Attention (q, k, v of
(B, H, T, D), default scale 1/sqrt(D), `is_causal`). Shapes are static, from the case's params.

The data inputs (a, b; q, k, v) are graph inputs, fed at run time; a layer's parameters (conv2d's filters,
layernorm's scale and shift) and the scalar are initializers, constant as they are in a deployed model, so a
runtime may lay them out for its kernels once when it compiles (OpenVINO reorders conv filters). The cost model
counts the filters, scale and shift once, as it does for every framework; the scalar, like NumPy's, is not an array.
ONNX's float attributes are float32 (Attention's default scale is computed by the runtime; Gelu's constants and
LayerNormalization's epsilon are the spec's), so a float64 case agrees with the float64 reference to ~1e-8, not 1e-15.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dlperf.frameworks import UnsupportedError
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import LAYERNORM_EPS, SCALAR

OPSET = 23
#: The initializers the cost model counts as arrays (the rest, the scalar, it does not).
COUNTED_CONSTANTS = {"conv2d": ("w",), "layernorm": ("g", "b")}


@dataclass
class OnnxOp:
    """One op as a serialized ONNX model, with its feeds and constants already in the case's dtype."""

    model: bytes
    feeds: dict[str, np.ndarray]
    constants: dict[str, np.ndarray]  # the initializers the cost model counts
    out_shape: tuple[int, ...]


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of a case's dtype (bfloat16: ml_dtypes', which onnx itself depends on)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def onnx_type(dtype: str) -> int:
    from onnx import TensorProto

    return {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
            "bfloat16": TensorProto.BFLOAT16}[dtype]


def build_graph(p: OpsParams) -> OnnxOp:
    """The case's op as a one-node ONNX model (UnsupportedError for an op without an ONNX operator)."""
    from onnx import checker, helper, numpy_helper

    op, dtype = p.op, p.dtype
    npdt, et = numpy_dtype(dtype), onnx_type(dtype)
    arrays = {k: v.astype(npdt) for k, v in p.inputs().items()}
    counted = COUNTED_CONSTANTS.get(op, ())
    constants = {k: arrays.pop(k) for k in counted}
    inits = dict(constants)
    if op == "scalar":
        inits["s"] = np.asarray(SCALAR, dtype=npdt)
    feeds = arrays
    names = [*feeds]
    attrs: dict[str, object] = {}
    if op in ("add", "mul", "sigmoid", "tanh", "relu", "softmax", "dot", "gelu"):
        kind = {"add": "Add", "mul": "Mul", "sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu",
                "softmax": "Softmax", "dot": "MatMul", "gelu": "Gelu"}[op]
        attrs = {"softmax": {"axis": 1}, "gelu": {"approximate": "tanh"}}.get(op, {})
    elif op == "scalar":
        kind, names = "Mul", ["a", "s"]
    elif op == "conv2d":
        pad = constants["w"].shape[-1] // 2
        kind, names, attrs = "Conv", ["a", "w"], {"pads": [pad] * 4, "strides": [1, 1]}
    elif op == "layernorm":
        kind, names, attrs = "LayerNormalization", ["a", "g", "b"], {"axis": -1, "epsilon": LAYERNORM_EPS}
    elif op == "attention":
        kind, names, attrs = "Attention", ["q", "k", "v"], {"is_causal": int(bool(p.causal))}
    else:  # pragma: no cover - every op of the workload is above
        raise UnsupportedError(f"op {op!r} has no ONNX form in dlperf")
    first = feeds["q" if op == "attention" else "a"]
    if op == "dot":
        out_shape: tuple[int, ...] = (first.shape[0], feeds["b"].shape[1])
    elif op == "conv2d":
        out_shape = (first.shape[0], constants["w"].shape[0], *first.shape[2:])
    else:
        out_shape = first.shape
    node = helper.make_node(kind, names, ["out"], **attrs)
    graph = helper.make_graph(
        [node], f"dlperf_ops_{op}",
        [helper.make_tensor_value_info(k, et, list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info("out", et, list(out_shape))],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="dlperf")
    model.ir_version = 10  # what ONNX Runtime 1.32 and OpenVINO 2026 read
    checker.check_model(model)
    return OnnxOp(model.SerializeToString(), feeds, constants, tuple(out_shape))


def array_nbytes(g: OnnxOp, out_nbytes: int) -> dict[str, int]:
    """The bytes the cost model counts: the feeds, the counted constants and the output, each once."""
    return {**{k: int(v.nbytes) for k, v in g.feeds.items()},
            **{k: int(v.nbytes) for k, v in g.constants.items()}, "out": out_nbytes}
