"""STREAM-like kernels at any working-set size, for the bandwidth ceilings a run measures at its start
(`runner.ceilings`): copy, add and triad in a framework's own ops, into kept buffers.

Counting is STREAM's, as in `dlperf.workloads.peaks`: every array read or written once (write-allocate
traffic is not counted), so a figure is comparable with the ops study's bytes/s, which count the same
way. NumPy's triad runs in two passes (it has no fused triad): its figure is lower than a one-pass
triad's, which only makes it lose the maximum over kernels. Arrays are filled with constants, not
random numbers: the values do not change the traffic, and filling is fast at DRAM sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dlperf.workloads.peaks import TRIAD_SCALAR

#: Kernel -> arrays it touches.
STREAM_ARRAYS = {"copy": 2, "add": 3, "triad": 3}
#: Framework families with stream kernels here.
STREAM_FAMILIES = ("numpy", "torch")


def stream_kernels(fw: Any, device: str, n: int) -> dict[str, tuple[Callable[[], object], float]]:
    """{kernel: (step, bytes per call)} over three float32 arrays of `n` elements on `device`."""
    itemsize = 4
    if fw.family == "numpy":
        import numpy as np

        a, b, c = (np.full(n, v, dtype=np.float32) for v in (1.0, 2.0, 0.5))

        def triad() -> None:
            np.multiply(c, TRIAD_SCALAR, out=a)
            np.add(a, b, out=a)

        steps: dict[str, Callable[[], object]] = {
            "copy": lambda: np.copyto(b, a), "add": lambda: np.add(b, c, out=a), "triad": triad}
    elif fw.family == "torch":
        torch = fw.import_module()
        a, b, c = (torch.full((n,), v, dtype=torch.float32, device=device) for v in (1.0, 2.0, 0.5))
        steps = {"copy": lambda: b.copy_(a), "add": lambda: torch.add(b, c, out=a),
                 "triad": lambda: torch.add(b, c, alpha=TRIAD_SCALAR, out=a)}
    else:
        raise ValueError(f"no stream kernels for the {fw.family} family (only {', '.join(STREAM_FAMILIES)})")
    return {k: (fn, float(STREAM_ARRAYS[k] * n * itemsize)) for k, fn in steps.items()}
