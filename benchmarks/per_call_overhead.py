"""The per-call timing mode's overhead: each call timed alone against calibrated blocks, on the same calls.

Per-call mode (`measure(per_call=True)`, generation's mode) brackets every call with a sync and a clock read at
each edge; block mode reads the clock once per block of calls (calibrated so the reads are < 0.1% of a sample).
The difference of the two medians, per call, is what per-call timing adds to each call it reports: printed in ns
and as a fraction of the call, for an empty call (the bare cost of the edges) and a short real call (a 64x64
float32 NumPy matmul, a few us; with --device cuda a torch matmul on the GPU, with its synchronisation). Rounds
alternate the two modes so that load drift hits both alike.

    python benchmarks/per_call_overhead.py [--rounds 7] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable


def calls(device: str) -> list[tuple[str, Callable[[], object], Callable[[], None] | None]]:
    """(name, call, sync) pairs to time: an empty call and a short real one."""
    if device == "cuda":
        import torch

        a = torch.randn(64, 64, device="cuda")
        return [("empty call + cuda sync", lambda: None, torch.cuda.synchronize),
                ("torch 64x64 matmul on cuda", lambda: a @ a, torch.cuda.synchronize)]
    import numpy as np

    x = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
    return [("empty call", lambda: None, None), ("numpy 64x64 float32 matmul", lambda: x @ x, None)]


def one(fn: Callable[[], object], sync: Callable[[], None] | None, per_call: bool) -> float:
    """The median per call of one measurement in either mode."""
    from dlperf import measure

    n = 400 if per_call else 30
    return measure(fn, sync=sync, per_call=per_call, min_samples=n, max_samples=n, min_run_time_s=0.0,
                   max_time_s=float("inf")).median_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    print(f"per-call mode (400 single calls) against block mode (30 calibrated blocks), {args.rounds} interleaved "
          f"rounds, device {args.device}; medians over rounds")
    for name, fn, sync in calls(args.device):
        per, block = [], []
        for _ in range(args.rounds):
            per.append(one(fn, sync, per_call=True))
            block.append(one(fn, sync, per_call=False))
        p, b = statistics.median(per), statistics.median(block)
        added = p - b
        share = "the bare cost of the edges" if fn() is None else f"{added / b:.1%} of the call"
        print(f"{name}: per-call median {p * 1e9:,.0f} ns | block median {b * 1e9:,.0f} ns | per-call / block "
              f"{p / b:.3f} | added per call {added * 1e9:,.0f} ns ({share})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
