"""An energy *estimate*, made only when asked (`--energy-estimate tdp`): TDP x utilisation x time.

It is not a measurement and is never stored or shown as one: it lives under
`energy_estimate` with `"kind": "estimate"` and the model spelled out.
"""

from __future__ import annotations

from typing import Any


def tdp_estimate(*, tdp_w: float, cpu_time_s: float, wall_s: float, cores: int) -> dict[str, Any]:
    """CPU energy ~ TDP x (process CPU time / (wall time x cores)) x wall time."""
    if tdp_w <= 0 or wall_s <= 0 or cores <= 0:
        raise ValueError("tdp_w, wall_s and cores must be positive")
    utilisation = min(1.0, cpu_time_s / (wall_s * cores))
    return {
        "kind": "estimate",
        "model": "TDP x CPU utilisation x time",
        "tdp_w": tdp_w,
        "utilisation": utilisation,
        "window_s": wall_s,
        "energy_j": tdp_w * utilisation * wall_s,
    }
