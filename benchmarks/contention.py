"""Contention: a case's contended/quiet time ratio with the old default thread count and with the new one.

The problem (issue 13): with another process on the cores, torch element-wise ops at 2 threads sat on an
~8 ms plateau (a 195 us sigmoid, a 232 us add on 12 MB) with a tight IQR: OpenMP threads waiting for a
descheduled sibling. The old default was every physical core; the new default is the physical cores other
processes leave idle when the run starts (`dlperf.runner.threads`). This runs, in one process and one
sitting, each case in dlperf's own worker:

  quiet      the machine as it is, default threads (= physical cores on a quiet machine);
  contended  next to a contender (a process running a 2-thread torch matmul loop), with
             old: threads = physical cores,  new: threads chosen as `dlperf run` now chooses them.

and prints contended/quiet for old and new, and the validity each contended case got (it must say
`contended`, whichever the default). Nothing is asserted on time: the machine is shared.

    python benchmarks/contention.py [--budget 1.0]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CONTENDER = """
import time, torch
torch.set_num_threads(2)
a = torch.randn(512, 512)
t = time.time()
while time.time() - t < 600:
    a @ a
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1.0, help="timer budget per case, seconds")
    args = ap.parse_args()

    from dlperf.core.settings import RunSettings
    from dlperf.hardware.probe import default_threads
    from dlperf.meters.activity import busy_cores_now, wait_idle
    from dlperf.runner.sweep import run_case
    from dlperf.runner.threads import BUSY_PROBE_S, idle_threads
    from dlperf.studies.loader import Case

    cores = default_threads()
    cases = [Case("ops", "torch", "cpu", {"op": op, "size_mb": mb, "dtype": "float32"})
             for op, mb in (("add", 12.0), ("sigmoid", 12.0), ("add", 2.0))]

    def timed(case: Case, threads: int) -> tuple[float, str]:
        settings = RunSettings(threads=threads, budget_s=args.budget, min_run_time_s=args.budget / 2,
                               timeout_s=300, energy=False)
        r = run_case(case, settings, "bench", env_id=0)
        if not r.ok:
            raise SystemExit(f"{case.key}: {r.status} {r.reason}")
        return float(r.m.median_s), str(r.m.validity)

    waited = wait_idle(30.0)
    print(f"{cores} physical cores; waited {waited['waited_s']} s for a quiet machine "
          f"(quiet: {waited['quiet']}, others {waited['others_cores']:.2f} cores)")
    quiet = {c.key: timed(c, cores) for c in cases}

    hog = subprocess.Popen([sys.executable, "-c", CONTENDER])
    try:
        time.sleep(2.0)  # the contender imports torch and starts
        busy = busy_cores_now(BUSY_PROBE_S)
        new_threads = idle_threads(cores, busy)
        print(f"contender running: others use {busy:.2f} cores; old default {cores} threads, "
              f"new default {new_threads} thread(s)")
        old = {c.key: timed(c, cores) for c in cases}
        new = {c.key: timed(c, new_threads) for c in cases}
    finally:
        hog.kill()
        hog.wait()

    print(f"{'case':44} {'quiet':>10} {'old':>10} {'old/quiet':>10} {'new':>10} {'new/quiet':>10}  validity old/new")
    for c in cases:
        q, (o, ov), (n, nv) = quiet[c.key][0], old[c.key], new[c.key]
        print(f"{c.key:44} {q * 1e6:8.1f}us {o * 1e6:8.1f}us {o / q:9.1f}x {n * 1e6:8.1f}us {n / q:9.1f}x  {ov}/{nv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
