"""`dlperf maxbatch WORKLOAD -p ...` end to end: a real search of a workload named with its parameters, each probe
a worker under a memory cap and a case of its own run: here the transformer's training step (torch builder). The
CNN model form is tests/workloads/test_cnn.py's; target resolution for every form, tests/runner/test_maxbatch.py's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import run_cli


def _search_found_the_boundary(db: Path, axis: str, cap_mib: int, stdout: str) -> None:
    """The stored probes bracket the boundary to within 1/32 and the output names it."""
    rows = sqlite3.connect(db).execute(f"select json_extract(params, '$.{axis}'), status from results").fetchall()
    ok = [v for v, s in rows if s == "ok"]
    oom = [v for v, s in rows if s == "oom"]
    assert ok and oom and max(ok) < min(oom), rows
    assert min(oom) - max(ok) <= max(1, max(ok) // 32)
    assert f"largest {axis} that fits under a {cap_mib} MiB cap: {max(ok)}" in stdout


def test_transformer_maxbatch(tmp_path):
    """The issue's example, the largest batch of gpt2-tiny's training step (64 tokens), under a 640 MiB cap rather
    than its 1 GiB: the same search (doubling, out-of-memory, bisection) over batches about half as large, so each
    probe's training steps cost half as much (docs/studies.md's 1 GiB line runs in tests/cli/test_readme.py)."""
    db = tmp_path / "r.sqlite"
    res = run_cli("maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p", "task=train", "-p", "seq_len=64",
                  "--mem-limit", "640MiB", "--steps", "1", "--start", "64", "--plot-dir", str(tmp_path / "plots"),
                  db=db, timeout=600)
    assert res.returncode == 0, res.stderr
    _search_found_the_boundary(db, "batch", 640, res.stdout)
    con = sqlite3.connect(db)
    assert {w for (w,) in con.execute("select distinct workload from results")} == {"transformer"}
    runs = con.execute("select study, variant from runs").fetchall()
    assert runs == [("maxbatch", "transformer model=gpt2-tiny task=train seq_len=64")]
    params = {p for (p,) in con.execute("select distinct json_extract(params, '$.seq_len') from results")}
    assert params == {64}  # the -p values reach every probe; only the batch varies
    assert "s/token" in res.stdout and "probes of transformer model=gpt2-tiny task=train seq_len=64" in res.stdout
    assert (tmp_path / "plots" / "maxbatch-memory.png").stat().st_size > 0
