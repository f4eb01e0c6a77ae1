"""The sequential backend: pure Python lists and loops. It is the executable specification.

No NumPy in the arithmetic: arrays arrive as NumPy containers, are turned into
Python lists, computed on with `for` loops and `math`, and handed back as NumPy
containers. Slow by nature (hundreds of times slower than vectorized); the
other backends are tested against it.

dtype: a result has its operands' dtype (NumPy's promotion; a Python number
does not widen an array), float32 or float64 (DTYPES). The arithmetic itself is
Python's float (binary64): each element is rounded to the array's dtype when the
result is stored, so a float32 add or multiply gives the float32 result and
sums (matmul, sum, conv2d) accumulate in binary64 before that rounding.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dlperf.nn.backends.host import DTYPES as DTYPES  # this backend's dtypes (operators.dtypes reads them)
from dlperf.nn.backends.host import host_array


def asarray(x):
    """A NumPy array of `x`, kept in its dtype if it is a float32/float64 array, else float64."""
    return host_array(x, "sequential")


def to_numpy(x):
    return np.asarray(x)


def _flat(x):
    """(values as a flat Python list, shape tuple); a Python number is a 0-d array."""
    if isinstance(x, (int, float)):
        return [float(x)], ()
    arr = np.asarray(x)
    return arr.ravel().tolist(), arr.shape


def _dtype(*xs):
    """The result dtype of operands (NumPy's promotion; a Python number does not widen an array): float64
    when all are Python numbers."""
    arrays = [np.asarray(x).dtype for x in xs if not isinstance(x, (int, float))]
    return np.result_type(*arrays) if arrays else np.dtype(np.float64)


def _out(values, shape, dtype):
    return np.array(values, dtype=dtype).reshape(shape)


def _binary(a, b, f):
    """Element-wise f(a, b) with the broadcasts the layers use: equal shapes, a scalar, or a row vector."""
    av, ash = _flat(a)
    bv, bsh = _flat(b)
    dt = _dtype(a, b)
    if ash == bsh:
        return _out([f(x, y) for x, y in zip(av, bv, strict=True)], ash, dt)
    if len(bv) == 1:
        return _out([f(x, bv[0]) for x in av], ash, dt)
    if len(av) == 1:
        return _out([f(av[0], y) for y in bv], bsh, dt)
    if len(bsh) == 1 and ash and ash[-1] == bsh[0]:
        m = bsh[0]
        return _out([f(x, bv[i % m]) for i, x in enumerate(av)], ash, dt)
    raise ValueError(f"sequential backend cannot broadcast {ash} with {bsh}")


def add(a, b):
    return _binary(a, b, lambda x, y: x + y)


def sub(a, b):
    return _binary(a, b, lambda x, y: x - y)


def mul(a, b):
    return _binary(a, b, lambda x, y: x * y)


def div(a, b):
    return _binary(a, b, lambda x, y: x / y)


def maximum(a, b):
    return _binary(a, b, lambda x, y: x if x >= y else y)


def _unary(a, f):
    v, sh = _flat(a)
    return _out([f(x) for x in v], sh, _dtype(a))


def exp(a):
    return _unary(a, math.exp)


def log(a):
    return _unary(a, math.log)


def relu(a):
    return _unary(a, lambda x: x if x > 0 else 0.0)


def relu_grad(a, grad):
    return _binary(a, grad, lambda x, g: g if x > 0 else 0.0)


def matmul(a, b):
    A, B = np.asarray(a).tolist(), np.asarray(b).tolist()
    n, k, m = len(A), len(B), len(B[0])
    out = [[0.0] * m for _ in range(n)]
    for i in range(n):
        row, orow = A[i], out[i]
        for p in range(k):
            aip, brow = row[p], B[p]
            for j in range(m):
                orow[j] += aip * brow[j]
    return _out(out, (n, m), _dtype(a, b))


def transpose(a):
    A = np.asarray(a).tolist()
    return _out([[A[i][j] for i in range(len(A))] for j in range(len(A[0]))], (len(A[0]), len(A)), _dtype(a))


def _strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return list(reversed(out))


def sum(a, axis):
    """Sum over one axis or a tuple of axes."""
    v, sh = _flat(a)
    axes = {axis % len(sh)} if isinstance(axis, int) else {x % len(sh) for x in axis}
    keep = [d for i, d in enumerate(sh) if i not in axes]
    st, kst = _strides(sh), _strides(keep)
    out = [0.0] * math.prod(keep)
    for idx in itertools.product(*(range(d) for d in sh)):
        pos = 0
        for j, i in enumerate(i for i in range(len(sh)) if i not in axes):
            pos += idx[i] * kst[j]
        out[pos] += v[sum_index(idx, st)]
    return _out(out, tuple(keep), _dtype(a))


def sum_index(idx, strides):
    total = 0
    for i, s in zip(idx, strides, strict=True):
        total += i * s
    return total


def _taps(n, k, c, ho, wo, r, s, h, w, stride, pad):
    """Every (batch, filter, out row, out col, channel, kernel row, kernel col, in row, in col) where a
    kernel tap lands inside the (unpadded) input: the one loop nest that conv2d and its gradients share."""
    for b, f, i, j, ch, u, v in itertools.product(range(n), range(k), range(ho), range(wo), range(c), range(r),
                                                  range(s)):
        y, xx = i * stride + u - pad, j * stride + v - pad
        if 0 <= y < h and 0 <= xx < w:
            yield b, f, i, j, ch, u, v, y, xx


def _zeros(shape):
    if len(shape) == 1:
        return [0.0] * shape[0]
    return [_zeros(shape[1:]) for _ in range(shape[0])]


def conv2d(x, w, stride=1, pad=0):
    """Cross-correlation: out[b,f,i,j] = sum over ch,u,v of x[b,ch,i*stride+u-pad, j*stride+v-pad] w[f,ch,u,v]."""
    X, Wt = np.asarray(x).tolist(), np.asarray(w).tolist()
    n, c, h, wd = np.shape(x)
    k, _, r, s = np.shape(w)
    ho, wo = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    out = _zeros((n, k, ho, wo))
    for b, f, i, j, ch, u, v, y, xx in _taps(n, k, c, ho, wo, r, s, h, wd, stride, pad):
        out[b][f][i][j] += X[b][ch][y][xx] * Wt[f][ch][u][v]
    return _out(out, (n, k, ho, wo), _dtype(x, w))


def conv2d_grad_weight(grad, x, w_shape, stride=1, pad=0):
    G, X = np.asarray(grad).tolist(), np.asarray(x).tolist()
    n, c, h, wd = np.shape(x)
    k, _, r, s = w_shape
    _, _, ho, wo = np.shape(grad)
    out = _zeros(tuple(w_shape))
    for b, f, i, j, ch, u, v, y, xx in _taps(n, k, c, ho, wo, r, s, h, wd, stride, pad):
        out[f][ch][u][v] += G[b][f][i][j] * X[b][ch][y][xx]
    return _out(out, tuple(w_shape), _dtype(grad, x))


def conv2d_grad_input(grad, w, x_shape, stride=1, pad=0):
    G, Wt = np.asarray(grad).tolist(), np.asarray(w).tolist()
    n, c, h, wd = x_shape
    k, _, r, s = np.shape(w)
    _, _, ho, wo = np.shape(grad)
    out = _zeros(tuple(x_shape))
    for b, f, i, j, ch, u, v, y, xx in _taps(n, k, c, ho, wo, r, s, h, wd, stride, pad):
        out[b][ch][y][xx] += G[b][f][i][j] * Wt[f][ch][u][v]
    return _out(out, tuple(x_shape), _dtype(grad, w))


def maxpool2d(x, k, stride):
    X = np.asarray(x).tolist()
    n, c, h, w = np.shape(x)
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    out = _zeros((n, c, ho, wo))
    arg = [[[[0] * wo for _ in range(ho)] for _ in range(c)] for _ in range(n)]
    for b, ch, i, j in itertools.product(range(n), range(c), range(ho), range(wo)):
        best, best_at = -math.inf, 0
        for u in range(k):
            for v in range(k):
                val = X[b][ch][i * stride + u][j * stride + v]
                if val > best:  # strict: the first maximum wins, as in the vectorized argmax
                    best, best_at = val, u * k + v
        out[b][ch][i][j], arg[b][ch][i][j] = best, best_at
    return _out(out, (n, c, ho, wo), _dtype(x)), np.array(arg, dtype=np.int64)


def maxpool2d_grad(grad, arg, x_shape, k, stride):
    G, A = np.asarray(grad).tolist(), np.asarray(arg).tolist()
    n, c, h, w = x_shape
    _, _, ho, wo = np.shape(grad)
    out = _zeros((n, c, h, w))
    for b, ch, i, j in itertools.product(range(n), range(c), range(ho), range(wo)):
        u, v = divmod(A[b][ch][i][j], k)
        out[b][ch][i * stride + u][j * stride + v] += G[b][ch][i][j]
    return _out(out, tuple(x_shape), _dtype(grad))


def softmax_cross_entropy(logits, labels):
    L = np.asarray(logits).tolist()
    y = [int(t) for t in np.asarray(labels).tolist()]
    n = len(L)
    loss, grad = 0.0, []
    for row, t in zip(L, y, strict=True):
        m = max(row)
        e = [math.exp(z - m) for z in row]
        total = math.fsum(e)
        p = [v / total for v in e]
        loss -= math.log(p[t])
        grad.append([(pi - (1.0 if i == t else 0.0)) / n for i, pi in enumerate(p)])
    return loss / n, _out(grad, (n, len(L[0])), _dtype(logits))
