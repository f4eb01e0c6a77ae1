"""A sweep stopped by SIGINT or SIGKILL, then rerun: finished cases are not rerun, nothing lost or duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import STUDIES, run_cli

STUDY = str(STUDIES / "many_ok.yaml")
N_CASES = 12


def stored(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text("SELECT case_key, started_at FROM results ORDER BY id"))]
    except Exception:
        return []
    finally:
        engine.dispose()


#: Set in the environment of the sweep a test starts: its workers inherit it, so they are told from others'.
TAG = "DLPERF_TEST_SWEEP"


def start_and_stop(db: Path, sig: int, after_cases: int = 3) -> subprocess.CompletedProcess[str] | int:
    env = dict(os.environ, DLPERF_DB=str(db), **{TAG: str(db)})
    proc = subprocess.Popen([sys.executable, "-m", "dlperf.cli", "run", STUDY], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while len(stored(db)) < after_cases:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "sweep made no progress"
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def workers_left(db: Path) -> list[str]:
    """Workers of the sweep that this test started (on `db`) still alive, orphans included: those whose
    environment carries its tag. Other tests' and other users' workers on the machine do not count."""
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if "dlperf.runner.worker" in " ".join(p.info["cmdline"] or []) and p.environ().get(TAG) == str(db):
                left.append(f"{p.pid} {' '.join(p.info['cmdline'])}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return left


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_sweep_resumes_without_loss_or_duplicates(tmp_path, sig):
    db = tmp_path / "r.sqlite"
    stopped = start_and_stop(db, sig)
    before = stored(db)
    assert 3 <= len(before) < N_CASES, "the sweep should have stopped partway"
    if sig == signal.SIGINT:
        assert stopped.returncode == 130
        err = stopped.stderr.strip().splitlines()
        assert len(err) == 1 and "interrupted:" in err[0] and "rerun the same command to resume" in err[0]
        assert "Traceback" not in stopped.stderr
    else:
        assert stopped.returncode == -signal.SIGKILL
    time.sleep(0.5)
    assert workers_left(db) == [], "a worker outlived its sweep"

    again = run_cli("run", STUDY, db=db)
    assert again.returncode == 0, again.stderr
    assert "resuming run many_ok-" in again.stdout
    assert f"{len(before)} of {N_CASES} cases already stored" in again.stdout
    after = stored(db)
    keys = [k for k, _ in after]
    assert len(after) == N_CASES and len(set(keys)) == N_CASES  # nothing lost, nothing duplicated
    assert after[: len(before)] == before  # finished cases were not run again (same rows, same start times)
