"""The vectorized backend: NumPy, with im2col for convolution.

dtype: arrays stay in the dtype they were given, float32 or float64 (DTYPES); a
result has its operands' dtype (NumPy's promotion: a Python number does not
widen a float32 array), and every buffer made here takes its operands' dtype.
"""

from __future__ import annotations

import numpy as np

from dlperf.nn.backends.host import DTYPES as DTYPES  # this backend's dtypes (operators.dtypes reads them)
from dlperf.nn.backends.host import host_array


def asarray(x):
    """`x` as a NumPy array, kept in its dtype if float32/float64; anything else (lists, ints) becomes float64."""
    return host_array(x, "vectorized")


def to_numpy(x):
    return np.asarray(x)


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def exp(a):
    return np.exp(a)


def log(a):
    return np.log(a)


def maximum(a, b):
    return np.maximum(a, b)


def relu(a):
    return np.maximum(a, 0)


def relu_grad(a, grad):
    """Gradient of relu at input `a`: grad where a > 0, else 0."""
    return grad * (a > 0)


def matmul(a, b):
    return a @ b


def transpose(a):
    # A contiguous copy: OpenBLAS runs `g @ W.T` about twice as slowly on the strided view
    # (measured: 24 ms vs 12 ms for 256x512 @ 512x784, float64); the copy costs well under 1 ms.
    return np.ascontiguousarray(a.T)


def sum(a, axis):
    return a.sum(axis=axis)


def _im2col(x, r, s, stride, pad):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (r, s), axis=(2, 3))[:, :, ::stride, ::stride]
    cols = win[:, :, :ho, :wo].transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * r * s)
    return cols, ho, wo


def conv2d(x, w, stride=1, pad=0):
    """Cross-correlation, NCHW x KCRS -> NKHoWo."""
    k, c, r, s = w.shape
    cols, ho, wo = _im2col(x, r, s, stride, pad)
    out = cols @ w.reshape(k, -1).T
    return out.reshape(x.shape[0], ho, wo, k).transpose(0, 3, 1, 2)


def conv2d_grad_weight(grad, x, w_shape, stride=1, pad=0):
    k, c, r, s = w_shape
    cols, _, _ = _im2col(x, r, s, stride, pad)
    g = grad.transpose(0, 2, 3, 1).reshape(-1, k)
    return (g.T @ cols).reshape(w_shape)


def conv2d_grad_input(grad, w, x_shape, stride=1, pad=0):
    n, c, h, wd = x_shape
    k, _, r, s = w.shape
    _, _, ho, wo = grad.shape
    cols = grad.transpose(0, 2, 3, 1).reshape(-1, k) @ w.reshape(k, -1)  # (n*ho*wo, c*r*s)
    cols = cols.reshape(n, ho, wo, c, r, s)
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), dtype=cols.dtype)
    for i in range(r):  # col2im: add each kernel offset's contribution back
        for j in range(s):
            xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride] += cols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return xp[:, :, pad:pad + h, pad:pad + wd]


def maxpool2d(x, k, stride):
    """Max over k x k windows; returns (output, flat argmax index within each window)."""
    n, c, h, w = x.shape
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::stride, ::stride][:, :, :ho, :wo]
    flat = win.reshape(n, c, ho, wo, k * k)
    arg = flat.argmax(axis=-1)
    return np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0], arg


def maxpool2d_grad(grad, arg, x_shape, k, stride):
    n, c, h, w = x_shape
    _, _, ho, wo = grad.shape
    out = np.zeros(x_shape, dtype=grad.dtype)
    di, dj = np.divmod(arg, k)
    nn_, cc, ii, jj = np.indices((n, c, ho, wo))
    np.add.at(out, (nn_, cc, ii * stride + di, jj * stride + dj), grad)
    return out


def softmax_cross_entropy(logits, labels):
    """Mean cross-entropy of softmax(logits) against integer labels, and its gradient wrt logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    n = logits.shape[0]
    idx = np.asarray(labels, dtype=np.int64)
    loss = float(-np.log(p[np.arange(n), idx]).mean())
    grad = p.copy()
    grad[np.arange(n), idx] -= 1.0
    return loss, grad / n
