"""Algorithm and bus bandwidth of a collective, with the definitions nccl-tests uses (doc/PERFORMANCE.md).

S is the operation's largest buffer in bytes (all-reduce and broadcast: the buffer; all-gather: the gathered
output; reduce-scatter: the input), t the time of one operation. algbw = S / t. busbw = algbw x 2(n-1)/n for
all-reduce, x (n-1)/n for all-gather and reduce-scatter, x 1 for broadcast: the factor makes the figure
comparable with the links' own speed whatever the number of ranks n.
"""

from __future__ import annotations

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth for `op` on `world_size` ranks."""
    n = world_size
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")


def bandwidths(op: str, size_bytes: int, world_size: int, time_s: float) -> tuple[float, float]:
    """(algbw, busbw) in bytes/s of one `op` of S = `size_bytes` that took `time_s` (nccl-tests' definitions)."""
    if time_s <= 0:
        raise ValueError(f"a collective takes a positive time, not {time_s!r} s")
    algbw = size_bytes / time_s
    return algbw, algbw * bus_factor(op, world_size)
