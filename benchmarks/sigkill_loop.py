"""SIGKILL during ddp, collectives and serve runs, many times over: nothing of dlperf's may be left 10 s after.

Issue 29, finding 7 asks for 20 kills in a loop. Each kill starts a fresh `dlperf run` (four processes importing
torch for a torchrun case): 20 of them take minutes of a 2-core machine, so `make test` kills three times
(tests/runner/test_sigkill_leaves_nothing.py) and this script does the loop. Round i kills, in turn, the sweep
while collectives ranks run, the worker while ddp ranks run, and the sweep while LoadGen serves; each round runs
in its own temporary folder with its own TMPDIR, and the check is the test's (its processes found by a mark in
their environment). Prints each round's outcome and the count; exits 1 if anything was left in any round.

    python benchmarks/sigkill_loop.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.runner import test_sigkill_leaves_nothing as t  # noqa: E402  (the test's own check, not a copy)

SCENARIOS = (
    ("sweep during collectives", t.test_sigkill_of_the_sweep_while_collectives_ranks_run),
    ("worker during ddp", t.test_sigkill_of_the_worker_while_ddp_ranks_run),
    ("sweep during serve", t.test_sigkill_of_the_sweep_while_loadgen_serves),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)
    failed = 0
    for i in range(args.rounds):
        name, scenario = SCENARIOS[i % len(SCENARIOS)]
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="dlperf-sigkill-loop-") as tmp:
            try:
                scenario(Path(tmp))
                outcome = "nothing left"
            except AssertionError as exc:
                failed += 1
                outcome = f"LEFT: {' '.join(str(exc).split())[:300]}"
        print(f"round {i + 1:2d}/{args.rounds}: SIGKILL of the {name}: {outcome} ({time.monotonic() - t0:.0f} s)",
              flush=True)
    print(f"{args.rounds - failed} of {args.rounds} rounds left nothing 10 s after the SIGKILL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
