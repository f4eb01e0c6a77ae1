"""What the two CPU backends (sequential, vectorized) share: host arrays kept in the dtype asked for."""

from __future__ import annotations

import numpy as np

#: The dtypes the CPU backends compute in.
DTYPES = ("float32", "float64")


def host_array(x: object, backend: str) -> np.ndarray:
    """`x` as a NumPy array, kept in its dtype if float32/float64; anything else (lists, ints) becomes float64.

    Another float dtype (float16, ...) is a TypeError naming `backend`: it is never widened silently."""
    arr = np.asarray(x)
    if arr.dtype.name in DTYPES:
        return arr
    if arr.dtype.kind == "f":
        raise TypeError(f"the {backend} backend computes in {' or '.join(DTYPES)}, not {arr.dtype}")
    return arr.astype(np.float64)
