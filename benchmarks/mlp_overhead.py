"""dlperf's overhead on a real training step: the mlp `tensors` variant (study 000, small size, torch CPU).

Times the same step two ways in one process, interleaved over rounds: dlperf's
median time per iteration, and a plain loop (perf_counter around `iters` calls,
divided by `iters`) as anyone would write it. Prints both and the ratio
dlperf / plain; the target is at most 1.05. Exits 1 if it is above.

    python benchmarks/mlp_overhead.py [--rounds 11] [--iters 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

TARGET = 1.05


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (5 proved too few on a shared VM)")
    ap.add_argument("--iters", type=int, default=100, help="iterations per plain-loop timing")
    args = ap.parse_args()

    from dlperf import measure
    from dlperf.frameworks import get_framework
    from dlperf.workloads import get_workload

    fw = get_framework("torch")
    torch = fw.import_module()
    w = get_workload("mlp")
    step = w.build(fw, "cpu", w.parse({"variant": "tensors", "size": "small"})).fn
    for _ in range(10):  # warm both paths alike
        step()
    ours, plain = [], []
    for _ in range(args.rounds):
        ours.append(measure(step, min_run_time_s=0.5, max_time_s=1.0).median_s)
        t0 = time.perf_counter()
        for _ in range(args.iters):
            step()
        plain.append((time.perf_counter() - t0) / args.iters)
    d, p = statistics.median(ours), statistics.median(plain)
    ratio = d / p
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, mlp tensors small (N=64, D_in=15000, H=100, "
          f"D_out=150), {args.rounds} interleaved rounds")
    print(f"dlperf median {d * 1e3:.3f} ms/iter | plain loop {p * 1e3:.3f} ms/iter | ratio dlperf/plain {ratio:.3f} "
          f"(target <= {TARGET}: {'met' if ratio <= TARGET else 'MISSED'})")
    print("per-round ratios: " + ", ".join(f"{o / q:.3f}" for o, q in zip(ours, plain, strict=True)))
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
