"""JAX's persistent compilation cache: the warm first call against the cold one (the mlp workload, small, CPU).

Each round is a fresh process that builds the jax mlp case as a worker does, with its compile cache in a new
folder, and makes its first call (cold: trace, XLA's compile, the cache's write, the run); the workload's
compile record then runs the warm first call in a second fresh process on that folder
(`workloads.xla_compile`). Prints each round's cold and warm seconds and whether the warm call hit the cache,
the medians and their ratio warm / cold. Target (issue 32): the warm first call is faster than the cold one,
ratio under 1, with every warm call a cache hit. Exits 1 if it is missed. The tests check the cache's hits and
writes (tests/adapters/test_xla_compile_cache.py); the speed is judged here, by a ratio, not by a timed test.

    python benchmarks/xla_warm_compile.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

from warm_cold import judge  # this folder's: the verdict both warm-compile benchmarks print

PARAMS = {"variant": "autograd", "size": "small"}

ROUND = """
import json, sys, tempfile, time
tempfile.tempdir = sys.argv[1]
from dlperf.frameworks import get_framework
from dlperf.workloads import get_workload
fw = get_framework("jax"); fw.seed(0)
w = get_workload("mlp"); p = w.parse(json.loads(sys.argv[2]))
step = w.build(fw, "cpu", p)
fn, sync = fw.prepare(step.fn, "cpu")
t0 = time.perf_counter(); fn(); sync(); cold_s = time.perf_counter() - t0
rec = w.extra_metrics(p, step)["compile"]
print(json.dumps({"cold_s": cold_s, "warm_s": rec.get("warm_s"), "hit": rec.get("warm_hit"),
                  "error": rec.get("warm_error")}))
"""


def one_round() -> dict:
    with tempfile.TemporaryDirectory(prefix="dlperf-xla-bench-") as folder:
        out = subprocess.run([sys.executable, "-c", ROUND, folder, json.dumps(PARAMS)], capture_output=True,
                             text=True, check=False, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"a round failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        r = one_round()
        rounds.append(r)
        warm = f"{r['warm_s'] * 1e3:.0f} ms" if r["warm_s"] is not None else f"none ({r['error']})"
        print(f"round {i + 1}: cold {r['cold_s'] * 1e3:.0f} ms, warm {warm}, cache hit {r['hit']}")
    return judge(rounds, lambda r: bool(r["hit"]), lambda s: f"{s * 1e3:.0f} ms", "call")


if __name__ == "__main__":
    sys.exit(main())
