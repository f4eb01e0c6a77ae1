#!/usr/bin/env python3
"""`make test`'s type check: mypy over src/dlperf (its settings in pyproject.toml), against a baseline that only
shrinks.

The strict modules (core, timing, store, units, errors: pyproject's override) must have no error at all. Every
other file may have at most the errors types-baseline.json records for it (mypy's default checks, which found 116
in 50 files when the check came); a file with more, or a file with errors that the baseline does not name, fails
the check with those errors printed. Where a file has fewer, the check passes and says so: `--update` then writes
the smaller counts (it refuses to raise any).

    python scripts/typecheck.py [--update]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "types-baseline.json"
STRICT = re.compile(r"^src/dlperf/(core|timing|store)/|^src/dlperf/(units|errors)\.py$")
ERROR = re.compile(r"^(?P<path>[^:]+\.py):(?P<line>\d+): error: ")


def run_mypy() -> tuple[int, list[str]]:
    """mypy's exit status and its error lines (notes left out)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"], cwd=ROOT,
                          capture_output=True, text=True)
    return proc.returncode, [ln for ln in proc.stdout.splitlines() if ERROR.match(ln)]


def judge(errors: list[str], baseline: dict[str, int]) -> tuple[list[str], dict[str, int], list[str]]:
    """(what fails, the counts now, the files whose count fell)."""
    counts = Counter(m["path"] for m in map(ERROR.match, errors) if m)
    failures = []
    for path, n in sorted(counts.items()):
        allowed = 0 if STRICT.search(path) else baseline.get(path, 0)
        if n > allowed:
            mine = [e for e in errors if e.startswith(f"{path}:")]
            why = "a strict module" if STRICT.search(path) else f"the baseline allows {allowed}"
            failures.append(f"{path}: {n} type errors, {why}:\n  " + "\n  ".join(mine))
    fell = [f"{p}: {baseline[p]} -> {counts.get(p, 0)}" for p in sorted(baseline) if counts.get(p, 0) < baseline[p]]
    return failures, dict(sorted(counts.items())), fell


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help="write the counts now, where none grew")
    args = ap.parse_args(argv)
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    status, errors = run_mypy()
    if status not in (0, 1):  # 2: mypy itself failed (a bad setting, a crash), not a type error
        print(f"typecheck: mypy ended with status {status}", file=sys.stderr)
        return 2
    first = args.update and not BASELINE.exists()  # the first baseline: today's counts, strict modules still 0
    failures, counts, fell = judge(errors, {p: n for p, n in Counter(
        m["path"] for m in map(ERROR.match, errors) if m).items()} if first else baseline)
    if failures:
        print("typecheck: more type errors than allowed\n" + "\n".join(failures), file=sys.stderr)
        return 1
    if args.update:
        BASELINE.write_text(json.dumps(counts, indent=1) + "\n")
        print(f"typecheck: baseline written: {sum(counts.values())} errors in {len(counts)} files")
        return 0
    print(f"typecheck: {sum(counts.values())} errors in {len(counts)} files, none over the baseline"
          + (f"; fewer in {len(fell)} files ({'; '.join(fell[:5])}): `python scripts/typecheck.py --update`"
             if fell else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
