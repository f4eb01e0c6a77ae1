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

Transformer ops (`TRANSFORMER_OPS`, and softmax when given a transformer shape)
are shaped by their own dimensions, not by `size_mb` (see `OpsParams`):
- attention, softmax(q k^T / sqrt(D)) v with q, k, v and the output of shape
  (B, H, T, D), T = S = seq_len: the two matrix products 2 B H T S D each
  (4 B H T S D, the transformer cost convention of `models/transformer/cost.py`),
  plus, per score, the scale (1 multiply) and the softmax (5): 6 B H T S.
  The whole T x S square is counted, causal or not: a kernel that skips the
  masked half does less work than this counts (the mask itself counts 0: it
  compares positions, not data). Bytes: q, k, v and the output once (4 B H T D
  items); the T x S scores a non-fused kernel writes and reads are not compulsory.
- softmax over attention scores: rows B H T of T columns, 5 per element as above.
- layernorm over the last axis of (B T, W), eps 1e-5, with scale g and shift b:
  per element sum-add (mean), subtract the mean, square, sum-add (variance),
  divide by the deviation, multiply by g, add b = 7; per row the two divisions
  by W, adding eps and the square root = 4. Bytes: input, output, g and b.
- gelu, tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))):
  x^3 (2 multiplies), times 0.044715, add x, times sqrt(2/pi), tanh (6, as
  above), add 1, 0.5 x, the product = 14 per element. Bytes: input and output.
"""

from __future__ import annotations

import math

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
#: Ops shaped by transformer dimensions only (softmax takes either a size or a transformer shape).
TRANSFORMER_OPS = ("attention", "layernorm", "gelu")
ALL_OPS = (*OPS, *TRANSFORMER_OPS)
#: Fields of `OpsParams` that shape each op that takes a transformer shape, in shape order.
SHAPE_FIELDS = {"attention": ("batch", "heads", "seq_len", "head_dim"), "softmax": ("batch", "heads", "seq_len"),
                "layernorm": ("batch", "seq_len", "width"), "gelu": ("batch", "seq_len", "width")}
FLOPS_PER_ELEMENT_TRANSFORMER = {"layernorm": 7, "gelu": 14}
LAYERNORM_FLOPS_PER_ROW = 4
#: Per attention score: the 1/sqrt(D) scale and the softmax.
ATTENTION_FLOPS_PER_SCORE = 1 + FLOPS_PER_ELEMENT["softmax"]
LAYERNORM_EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)


def transformer_shape(op: str, dims: dict[str, int]) -> dict[str, int]:
    """The array dimensions of `op` at a transformer shape (`dims`: the op's `SHAPE_FIELDS`).

    softmax runs over attention scores: B H T rows of T columns, the layout the sized softmax uses."""
    if op == "attention":
        return {k: dims[k] for k in SHAPE_FIELDS["attention"]}
    if op == "softmax":
        return {"rows": dims["batch"] * dims["heads"] * dims["seq_len"], "cols": dims["seq_len"]}
    if op in ("layernorm", "gelu"):
        return {"tokens": dims["batch"] * dims["seq_len"], "width": dims["width"]}
    raise ValueError(f"op {op!r} takes no transformer shape")


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
    if op == "attention":
        dims = (shape["batch"], shape["heads"], shape["seq_len"], shape["head_dim"])
        return {"q": normal(*dims), "k": normal(*dims), "v": normal(*dims)}
    if op == "layernorm":
        a = normal(shape["tokens"], shape["width"])
        a += np.float32(0.5)  # a mean away from 0, so subtracting it matters
        g = normal(shape["width"])
        g *= np.float32(0.1)
        g += np.float32(1.0)
        b = normal(shape["width"])
        b *= np.float32(0.1)
        return {"a": a, "g": g, "b": b}
    if op == "gelu":
        return {"a": normal(shape["tokens"], shape["width"])}
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


def reference(op: str, inputs: dict[str, np.ndarray], causal: bool = False) -> np.ndarray:
    """The op in float64 NumPy: what every framework's output is checked against (`causal`: attention's mask)."""
    if op == "attention":
        q, k, v = (inputs[n].astype(np.float64) for n in "qkv")
        scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
        if causal:  # query i sees keys 0..i
            t, s = scores.shape[-2:]
            scores = np.where(np.tril(np.ones((t, s), dtype=bool)), scores, -np.inf)
        return reference("softmax", {"a": scores.reshape(-1, scores.shape[-1])}).reshape(scores.shape) @ v
    a = inputs["a"].astype(np.float64)
    if op == "layernorm":
        mean = a.mean(axis=-1, keepdims=True)
        var = ((a - mean) ** 2).mean(axis=-1, keepdims=True)
        return (a - mean) / np.sqrt(var + LAYERNORM_EPS) * inputs["g"] + inputs["b"]
    if op == "gelu":
        return 0.5 * a * (1.0 + np.tanh(GELU_C * (a + 0.044715 * a**3)))
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
    if op == "attention":
        bh, t, d = shape["batch"] * shape["heads"], shape["seq_len"], shape["head_dim"]
        scores = bh * t * t  # S = T: self-attention, the whole square
        return Cost(flops=float(attention_matmul_flops(shape) + ATTENTION_FLOPS_PER_SCORE * scores),
                    bytes_moved=float(4 * bh * t * d * item))
    if op in FLOPS_PER_ELEMENT_TRANSFORMER:
        rows, width = shape["tokens"], shape["width"]
        flops = FLOPS_PER_ELEMENT_TRANSFORMER[op] * rows * width
        if op == "layernorm":
            flops += LAYERNORM_FLOPS_PER_ROW * rows
            return Cost(flops=float(flops), bytes_moved=float((2 * rows * width + 2 * width) * item))
        return Cost(flops=float(flops), bytes_moved=float(2 * rows * width * item))
    raise ValueError(f"unknown op {op!r}")


def attention_matmul_flops(shape: dict[str, int]) -> int:
    """The matrix products of attention alone, 4 B H T S D (what FlopCounterMode counts for SDPA)."""
    return 4 * shape["batch"] * shape["heads"] * shape["seq_len"] ** 2 * shape["head_dim"]


def describe(shape: dict[str, int]) -> str:
    return "x".join(str(v) for v in shape.values())
