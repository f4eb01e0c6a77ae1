"""CLI start-up: `dlperf --help` against a bare `python -c pass`, in one run.

Target (issue 2): `dlperf --help` starts in under a second. Prints the median of
several starts for both, their ratio, and dlperf's own share; also lists any
framework module that `import dlperf.cli` pulled in (there must be none).
Exits 1 if the median start is a second or more.

    python benchmarks/cli_startup.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_S = 1.0
HEAVY = ("numpy", "torch", "tensorflow", "jax", "pytensor", "sqlalchemy", "pydantic", "scipy", "pandas")


def start_time_s(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    bare, cli = [], []
    for _ in range(args.repeats):  # interleaved, so load drift hits both alike
        bare.append(start_time_s([sys.executable, "-c", "pass"]))
        cli.append(start_time_s([sys.executable, "-m", "dlperf.cli", "--help"]))
    b, c = statistics.median(bare), statistics.median(cli)
    probe = f"import sys, dlperf.cli; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    heavy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"python -c pass: median {b * 1e3:.0f} ms | dlperf --help: median {c * 1e3:.0f} ms | "
          f"ratio {c / b:.2f} | dlperf's own share {(c - b) * 1e3:.0f} ms | target < {TARGET_S:g} s: "
          f"{'met' if c < TARGET_S else 'MISSED'}")
    print(f"modules imported by `import dlperf.cli` among {', '.join(HEAVY)}: {heavy or 'none'}")
    return 0 if c < TARGET_S and not heavy else 1


if __name__ == "__main__":
    sys.exit(main())
