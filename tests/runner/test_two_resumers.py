"""Two `dlperf run` processes resuming one interrupted run at the same moment, on SQLite and on a real
PostgreSQL server: exactly one runs the remaining cases, the other exits 2 with one line naming the owner,
and every case is stored once. A run whose parent was SIGKILLed shows as `interrupted (owner gone)` and is
taken over by the next `dlperf run` of the same command.

Only this test's own processes count (its sweep's workers carry its tag, as in test_resume). The study is
tests/studies/six_ok.yaml, six trivial faults cases: who runs the remaining cases is the runner's and the
store's, whatever the workload, and an ops study would add ceilings and plots to every run without touching that path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from sqlalchemy import create_engine, text

from dlperf.store.leases import host_id
from tests.conftest import run_cli
from tests.runner.test_resume import N_CASES, STUDY, TAG, as_from_a_terminal, stop_once_stored, workers_left


def stored(url: str) -> list[tuple[str, str]]:
    """(case_key, started_at) of every stored result, in the order stored."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [(r[0], str(r[1])) for r in conn.execute(text("SELECT case_key, started_at FROM results "
                                                                  "ORDER BY id"))]
    except Exception:  # not created yet
        return []
    finally:
        engine.dispose()


def start(url: str) -> subprocess.Popen[str]:
    """`dlperf run six_ok` on the store at `url`, as a user starts it, in a scratch folder."""
    env = dict(os.environ, DLPERF_DB=url, COLUMNS="200", **{TAG: url})
    env.pop("DLPERF_LEASE_STALE_S", None)
    return subprocess.Popen([sys.executable, "-m", "dlperf.cli", "run", STUDY], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tempfile.mkdtemp(prefix="dlperf-"),
                            preexec_fn=as_from_a_terminal)


def stop_after(url: str, sig: int, after_cases: int = 3) -> int:
    """Start a sweep, stop it with `sig` once `after_cases` cases are stored; its PID."""
    proc = start(url)
    stop_once_stored(proc, lambda: len(stored(url)), sig, after_cases)
    return proc.pid


def runs_table(url: str) -> str:
    res = run_cli("runs", env={"DLPERF_DB": url})
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_two_resumers_of_one_run(store_url, sig):
    killed_pid = stop_after(store_url, sig)
    before = stored(store_url)
    assert 3 <= len(before) < N_CASES
    listed = runs_table(store_url)
    if sig == signal.SIGKILL:  # left `running`, its owner dead: shown as such, by `runs` and `show`
        assert "interrupted (owner gone)" in listed
        show = run_cli("show", "latest", env={"DLPERF_DB": store_url})
        assert show.returncode == 0 and "interrupted (owner gone)" in show.stdout
    else:
        assert "interrupted" in listed and "owner gone" not in listed

    first, second = start(store_url), start(store_url)  # the same command, at the same moment
    outs = {p.pid: p.communicate(timeout=600) for p in (first, second)}
    codes = {p.pid: p.returncode for p in (first, second)}
    assert sorted(codes.values()) == [0, 2], outs
    winner = next(pid for pid, code in codes.items() if code == 0)
    loser = next(pid for pid, code in codes.items() if code == 2)
    w_out, w_err = outs[winner]
    l_out, l_err = outs[loser]
    lines = l_err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in l_err, l_err
    assert lines[0].startswith("dlperf: error: run six_ok-") and "is being executed by" in lines[0]
    assert f"pid {winner} on {host_id()} since " in lines[0] and "--new" in lines[0]
    assert "last heartbeat" in lines[0]
    assert f"{len(before)} of {N_CASES} cases already stored" in w_out, w_out + w_err
    took_over = f"from pid {killed_pid} on {host_id()}: pid {killed_pid} on"
    assert ("taking over run six_ok-" in w_out and took_over in w_out) == (sig == signal.SIGKILL), w_out
    assert f"[4/{N_CASES}]" not in l_out  # the loser ran no case

    after = stored(store_url)
    keys = [k for k, _ in after]
    assert len(after) == N_CASES and len(set(keys)) == N_CASES  # nothing lost, nothing duplicated
    assert after[: len(before)] == before  # finished cases were not run again
    engine = create_engine(store_url)
    with engine.connect() as conn:
        assert [tuple(r) for r in conn.execute(text("SELECT status FROM runs"))] == [("complete",)]
        assert conn.execute(text("SELECT count(*) FROM run_leases")).scalar() == 0  # given back
    engine.dispose()
    assert "complete" in runs_table(store_url)
    time.sleep(0.5)
    assert workers_left(store_url) == [], "a worker outlived its sweep"
