"""The cuda backend: hand-written CUDA C kernels (cuda_kernels.py) compiled at run time by CuPy.

Arrays are CuPy float64 arrays on the current GPU: the kernels are written in
double only (DTYPES), so an array of another float dtype is refused, never
silently widened (a float32 case of nn-cuda is `unsupported`, with that reason).
The matrix product runs either the tiled shared-memory kernel (`MATMUL =
"tiled"`, the default) or cuBLAS through CuPy (`"cublas"`); the frameworks
nn-cuda and nn-cuda-cublas select one each, so both are timed and reported
separately. Reductions along axes use CuPy's own sum. No GPU or no CuPy:
`check_available` says so in one line.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from dlperf.nn.backends.cuda_kernels import KERNELS, SOURCE

MATMUL = "tiled"
DTYPES = ("float64",)
THREADS = 256
_BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "maximum": 4}
_UNARY = {"exp": 0, "log": 1, "relu": 2}


def check_available() -> None:
    from dlperf.nn.operators import BackendUnavailable

    try:
        import cupy
    except ImportError:
        raise BackendUnavailable("the cuda backend needs CuPy and an NVIDIA GPU: pip install -e '.[gpu]'") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        raise BackendUnavailable(f"the cuda backend found no usable GPU: {exc}") from None
    if count == 0:
        raise BackendUnavailable("the cuda backend found no GPU")


@cache
def _cp() -> Any:
    import cupy

    return cupy


@cache
def _kernel(name: str) -> Any:
    assert name in KERNELS
    return _cp().RawModule(code=SOURCE).get_function(name)


def _blocks(n: int) -> tuple[int]:
    return (max(1, math.ceil(n / THREADS)),)


def asarray(x: Any) -> Any:
    """A contiguous float64 CuPy array of `x`; a float array of another dtype is an error (no silent widening)."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.kind == "f" and dtype.name not in DTYPES:
        raise TypeError(f"the cuda backend's kernels compute in float64 only, not {dtype}")
    return _cp().ascontiguousarray(_cp().asarray(x, dtype=_cp().float64))


def to_numpy(x: Any) -> Any:
    return _cp().asnumpy(x)


def _dev(x: Any) -> Any:
    cp = _cp()
    if isinstance(x, (int, float)):
        return cp.full((1,), float(x), dtype=cp.float64)
    return asarray(x)


def _binary(a: Any, b: Any, op: str) -> Any:
    cp = _cp()
    a, b = _dev(a), _dev(b)
    shape = a.shape if a.size >= b.size else b.shape
    n = max(a.size, b.size)
    small = min(a, b, key=lambda t: t.size)
    big = a if small is b else b
    if small.size not in (1, n) and not (small.ndim == 1 and big.shape[-1] == small.size):
        raise ValueError(f"cuda backend cannot broadcast {a.shape} with {b.shape}")
    out = cp.empty(shape, dtype=cp.float64)
    _kernel("ewise_binary")(_blocks(n), (THREADS,), (a, b, out, cp.int64(n), cp.int64(a.size), cp.int64(b.size),
                                                      cp.int32(_BINARY[op])))
    return out


def add(a: Any, b: Any) -> Any:
    return _binary(a, b, "add")


def sub(a: Any, b: Any) -> Any:
    return _binary(a, b, "sub")


def mul(a: Any, b: Any) -> Any:
    return _binary(a, b, "mul")


def div(a: Any, b: Any) -> Any:
    return _binary(a, b, "div")


def maximum(a: Any, b: Any) -> Any:
    return _binary(a, b, "maximum")


def _unary(a: Any, op: str) -> Any:
    cp = _cp()
    a = _dev(a)
    out = cp.empty_like(a)
    _kernel("ewise_unary")(_blocks(a.size), (THREADS,), (a, out, cp.int64(a.size), cp.int32(_UNARY[op])))
    return out


def exp(a: Any) -> Any:
    return _unary(a, "exp")


def log(a: Any) -> Any:
    return _unary(a, "log")


def relu(a: Any) -> Any:
    return _unary(a, "relu")


def relu_grad(a: Any, grad: Any) -> Any:
    cp = _cp()
    a, grad = _dev(a), _dev(grad)
    out = cp.empty_like(a)
    _kernel("relu_grad")(_blocks(a.size), (THREADS,), (a, grad, out, cp.int64(a.size)))
    return out


def matmul(a: Any, b: Any) -> Any:
    cp = _cp()
    a, b = _dev(a), _dev(b)
    if MATMUL == "cublas":
        return cp.matmul(a, b)
    m, k = a.shape
    n = b.shape[1]
    out = cp.empty((m, n), dtype=cp.float64)
    _kernel("matmul_tiled")((math.ceil(n / 16), math.ceil(m / 16)), (16, 16),
                            (a, b, out, cp.int32(m), cp.int32(n), cp.int32(k)))
    return out


def transpose(a: Any) -> Any:
    cp = _cp()
    a = _dev(a)
    rows, cols = a.shape
    out = cp.empty((cols, rows), dtype=cp.float64)
    _kernel("transpose")(_blocks(a.size), (THREADS,), (a, out, cp.int32(rows), cp.int32(cols)))
    return out


def sum(a: Any, axis: Any) -> Any:
    return _dev(a).sum(axis=axis)


def _conv(kernel: str, out_shape: tuple[int, ...], first: Any, second: Any, x_shape: Any, w_shape: Any,
          stride: int, pad: int) -> Any:
    """Launch one of the three convolution kernels: one thread per element of `out_shape`."""
    cp = _cp()
    n, c, h, w = x_shape
    k, _, r, s = w_shape
    ho, wo = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    out = cp.empty(tuple(out_shape), dtype=cp.float64)
    dims = [cp.int32(v) for v in (n, c, h, w, k, r, s, ho, wo, stride, pad)]
    _kernel(kernel)(_blocks(out.size), (THREADS,), (_dev(first), _dev(second), out, *dims))
    return out


def conv2d(x: Any, w: Any, stride: int = 1, pad: int = 0) -> Any:
    n, _, h, wd = x.shape
    k, _, r, s = w.shape
    out_shape = (n, k, (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1)
    return _conv("conv2d_fwd", out_shape, x, w, x.shape, w.shape, stride, pad)


def conv2d_grad_input(grad: Any, w: Any, x_shape: Any, stride: int = 1, pad: int = 0) -> Any:
    return _conv("conv2d_grad_input", tuple(x_shape), grad, w, x_shape, w.shape, stride, pad)


def conv2d_grad_weight(grad: Any, x: Any, w_shape: Any, stride: int = 1, pad: int = 0) -> Any:
    return _conv("conv2d_grad_weight", tuple(w_shape), grad, x, x.shape, w_shape, stride, pad)


def maxpool2d(x: Any, k: int, stride: int) -> Any:
    cp = _cp()
    x = _dev(x)
    n, c, h, w = x.shape
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    out = cp.empty((n, c, ho, wo), dtype=cp.float64)
    arg = cp.empty((n, c, ho, wo), dtype=cp.int64)
    args = [cp.int32(v) for v in (n, c, h, w, k, stride, ho, wo)]
    _kernel("maxpool_fwd")(_blocks(out.size), (THREADS,), (x, out, arg, *args))
    return out, arg


def maxpool2d_grad(grad: Any, arg: Any, x_shape: Any, k: int, stride: int) -> Any:
    cp = _cp()
    grad = _dev(grad)
    n, c, h, w = x_shape
    _, _, ho, wo = grad.shape
    dx = cp.zeros(tuple(x_shape), dtype=cp.float64)
    args = [cp.int32(v) for v in (n, c, h, w, k, stride, ho, wo)]
    _kernel("maxpool_grad")(_blocks(grad.size), (THREADS,), (grad, cp.asarray(arg, dtype=cp.int64), dx, *args))
    return dx


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    cp = _cp()
    logits = _dev(logits)
    n, classes = logits.shape
    rows, grad = cp.empty(n, dtype=cp.float64), cp.empty_like(logits)
    _kernel("softmax_ce")(_blocks(n), (THREADS,), (logits, cp.asarray(labels, dtype=cp.int64), rows, grad,
                                                    cp.int32(n), cp.int32(classes)))
    return float(rows.mean()), grad
