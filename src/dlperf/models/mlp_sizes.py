"""Study 000's two-layer net: its three sizes (the paper's Table 1), shared by the `mlp` workload and the
`dlperf:mlp-SIZE` sources (here, below both, so neither imports the other)."""

from __future__ import annotations

#: Study 000, Table 1: (N, D_in, H, D_out).
SIZES: dict[str, tuple[int, int, int, int]] = {"small": (64, 15000, 100, 150), "medium": (192, 20000, 300, 200),
                                               "large": (384, 40000, 600, 400)}

__all__ = ["SIZES"]
