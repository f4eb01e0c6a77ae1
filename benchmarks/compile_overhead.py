"""The eager variant under the compiler-variant machinery against plain eager (examples/mlp.py, torch CPU).

Two Steps of the model workload's torch builder on the same source and inputs: one built from parameters that
name `variant: eager` (as `dlperf bench --variant eager --variant compile` builds its reference), one from
parameters with no variant at all (as a plain `dlperf bench` builds it). Both timed by `dlperf.timing.measure`
as `dlperf bench` times a case (per-call mode, its warm-up, minimum run time and budget), interleaved over rounds,
in one process at one thread count. Prints each side's median over rounds, the ratio variant-eager / plain-eager
and its per-round spread; the target is within 3% either way. Exits 1 if it is missed. The cores other processes
kept busy before each round are printed beside the ratio, to judge a miss by.

    python benchmarks/compile_overhead.py [--rounds 9] [--batch 32] [--threads N] [--min-run-time 0.2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

#: The variant machinery's eager median within this fraction of plain eager's, either way.
TARGET = 0.03
SOURCE = str(Path(__file__).resolve().parent.parent / "examples" / "mlp.py") + ":build"



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="default: as a run picks them")
    ap.add_argument("--min-run-time", dest="min_run_time_s", type=float, default=0.2,
                    help="seconds per timing on each side (dlperf bench's minimum run time)")
    args = ap.parse_args()

    from dlperf import measure
    from dlperf.frameworks import get_framework
    from dlperf.meters.activity import busy_cores_now
    from dlperf.runner.threads import threads_now
    from dlperf.workloads import get_workload

    fw = get_framework("torch")
    torch = fw.import_module()
    fw.set_threads(args.threads or threads_now())
    w = get_workload("model")
    point = {"source": SOURCE, "input": ["x:float32[B,256]"], "batch": args.batch}
    plain = w.build(fw, "cpu", w.parse(point))
    variant = w.build(fw, "cpu", w.parse(point | {"variant": "eager"}))
    timing = {"warmup": 3, "min_run_time_s": args.min_run_time_s, "max_time_s": 1.0, "per_call": True}
    sync = fw.sync_fn("cpu")
    ours, theirs, busy = [], [], []
    for _ in range(args.rounds):
        busy.append(busy_cores_now(0.2))
        ours.append(measure(variant.fn, sync=sync, **timing).median_s)
        theirs.append(measure(plain.fn, sync=sync, **timing).median_s)
    v, e = statistics.median(ours), statistics.median(theirs)
    ratio = v / e
    per = [a / b for a, b in zip(ours, theirs, strict=True)]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; examples/mlp.py:build infer, batch "
          f"{args.batch} x 256 fp32; {args.rounds} interleaved rounds")
    print(f"variant eager median {v * 1e6:.1f} us/call | plain eager {e * 1e6:.1f} us/call | ratio "
          f"{ratio:.3f} (target within {TARGET:.0%}: {'met' if abs(ratio - 1) <= TARGET else 'MISSED'})")
    print(f"per-round ratios: {', '.join(f'{r:.3f}' for r in per)} (range {min(per):.3f}-{max(per):.3f})")
    seen = ", ".join("?" if b is None else f"{b:.1f}" for b in busy)
    print(f"cores busy with other processes before each round: {seen} (of {os.cpu_count()})")
    return 0 if abs(ratio - 1) <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
