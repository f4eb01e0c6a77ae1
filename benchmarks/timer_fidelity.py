"""Timer fidelity: dlperf.measure's median vs torch.utils.benchmark's, in one process.

Target (issue 2): for a 1024x1024 fp32 torch matmul and a 10-element torch add,
the two medians agree within 5%. Both timers time the *same* callable, so what is
compared is the timing machinery, not two ways of writing the call. The two are
interleaved over several rounds (dlperf, torch, dlperf, torch, ...) so that drift
in a shared machine's load hits both alike; the ratio of the medians of the
rounds is reported. Prints both ratios and dlperf's per-sample overhead in ns;
exits 1 if a ratio is outside the target.

    python benchmarks/timer_fidelity.py [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys

TARGET = 0.05


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--min-run-time", type=float, default=1.0, help="seconds per timing, both timers")
    args = ap.parse_args()

    import torch
    from torch.utils.benchmark import Timer

    from dlperf.timing import measure

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = {}
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    c = torch.empty(1024, 1024)
    cases["matmul 1024x1024 fp32"] = functools.partial(torch.matmul, a, b, out=c)
    x, y = torch.randn(10), torch.randn(10)
    z = torch.empty(10)
    cases["add 10 elements fp32"] = functools.partial(torch.add, x, y, out=z)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} interleaved rounds, "
          f"{args.min_run_time:g} s per timing")
    failed = False
    for name, fn in cases.items():
        ours, theirs, overheads, blocks = [], [], [], []
        for _ in range(args.rounds):
            m = measure(fn, min_run_time_s=args.min_run_time, max_time_s=args.min_run_time * 2)
            ours.append(m.median_s)
            overheads.append(m.timer_overhead_s)
            blocks.append(m.block_size)
            t = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
            theirs.append(t.blocked_autorange(min_run_time=args.min_run_time).median)
        d, r = statistics.median(ours), statistics.median(theirs)
        ratio = d / r
        ok = abs(ratio - 1) <= TARGET
        failed |= not ok
        overhead_ns = statistics.median(overheads) * 1e9
        sample_s = d * statistics.median(blocks)
        print(f"{name:24s} dlperf median {d * 1e6:10.3f} us | torch.utils.benchmark median {r * 1e6:10.3f} us | "
              f"ratio dlperf/torch {ratio:.4f} ({'within' if ok else 'OUTSIDE'} {TARGET:.0%})")
        print(f"{'':24s} dlperf timer overhead {overhead_ns:.0f} ns per sample = {overhead_ns * 1e-9 / sample_s:.4%} "
              f"of a sample ({statistics.median(blocks):.0f} calls per sample); per-round ratios "
              + ", ".join(f"{o / t:.3f}" for o, t in zip(ours, theirs, strict=True)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
