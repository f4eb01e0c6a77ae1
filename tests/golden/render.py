"""Render every read-only output of the golden store (show, report, export, runs, compare) in-process.

The golden store holds real runs of several studies, measured once with dlperf at commit c0de3e7
(before the issue-12 reshaping); `outputs/` holds what that dlperf printed for them. The test
renders the same commands with today's code and requires the same text, so a refactor that changes
a printed figure fails. Run this file as a script to write `outputs/` anew (only when a change of
output is intended, and say so in the commit).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
STORE = HERE / "store-v1.db"
OUTPUTS = HERE / "outputs"

RUNS = ("peaks-20261122-203510-8384", "smoke-20261122-203532-fdee", "ops_tiny-20261122-203539-18c9",
        "mlp-20261122-203543-4ea0", "backends-20261122-203619-4e4a", "cnn_tiny-20261122-203638-ee8d",
        "faults-20261122-203705-263c", "maxbatch-20261122-203722-4151")


def commands() -> dict[str, list[str]]:
    """Output name -> dlperf arguments (without --db)."""
    out: dict[str, list[str]] = {"runs": ["runs"],
                                 "compare": ["compare", "smoke-20261122-203532-fdee", "ops_tiny-20261122-203539-18c9"]}
    for run in RUNS:
        study = run.split("-")[0]
        out[f"{study}.show"] = ["show", run]
        out[f"{study}.report"] = ["report", run]
        out[f"{study}.report.md"] = ["report", run, "--format", "markdown"]
        out[f"{study}.export.csv"] = ["export", run, "--format", "csv"]
        out[f"{study}.export.json"] = ["export", run, "--format", "json"]
    return out


def render_all() -> dict[str, str]:
    """Each command's stdout, run against a copy of the golden store in a scratch folder."""
    from click.testing import CliRunner

    from dlperf.cli import cli

    os.environ["COLUMNS"] = "200"
    scratch = Path(tempfile.mkdtemp(prefix="dlperf-golden-"))
    db = scratch / "store.sqlite"
    shutil.copy(STORE, db)
    cwd = Path.cwd()
    os.chdir(scratch)
    try:
        out = {}
        for name, args in commands().items():
            res = CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)
            if res.exit_code != 0:
                raise RuntimeError(f"dlperf {' '.join(args)} exited {res.exit_code}: {res.output[-500:]}")
            out[name] = res.stdout.replace(str(db), "STORE")
        return out
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    OUTPUTS.mkdir(exist_ok=True)
    for name, text in render_all().items():
        (OUTPUTS / f"{name}.txt").write_text(text)
    print(f"wrote {len(commands())} outputs to {OUTPUTS}", file=sys.stderr)
