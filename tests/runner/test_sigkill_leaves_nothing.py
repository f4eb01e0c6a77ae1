"""Issue 29, finding 7: 10 s after a SIGKILL of a dlperf process during a ddp, collectives or serve run, none of
its processes and none of its temporary folders is left (core/janitor.py). Every process of a run here carries a
mark in its environment, and its temporary folders go to a folder of the test's own (TMPDIR), so the test looks at
nothing else on the machine. The kill comes at a moment the run is known to be in: a rank started, or LoadGen's
folder made. `benchmarks/sigkill_loop.py` repeats these kills many times."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "tests" / "studies"


def marked(mark: str) -> dict[int, str]:
    """PID -> command line of every process whose environment carries `mark`."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"DLPERF_TEST_MARK={mark}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def wait_for(what: Callable[[], object], timeout_s: float, step_s: float = 0.05) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step_s)
    return what()


def leftovers(mark: str, tmp: Path) -> tuple[dict[int, str], list[str]]:
    """The marked processes, and the folders in TMPDIR but torch's compile cache (torchinductor_USER: a cache
    kept on purpose, as after any run, not a temporary folder)."""
    return marked(mark), sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_"))


def kill_during(tmp_path: Path, study: str, ready: Callable[[dict[int, str], Path], int | None],
                whole_run_gone: bool = True) -> None:
    """Start `dlperf run STUDY` (a file in tests/studies, or a path), SIGKILL the process `ready` names once it
    names one, then check that within 10 s the processes it started and the temporary folders there were then are
    gone (with `whole_run_gone`: every marked process and folder, the run's own included); finally, once the run
    ends, that nothing is left."""
    mark, tmp = uuid.uuid4().hex, tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, DLPERF_TEST_MARK=mark, TMPDIR=str(tmp), DLPERF_CACHE_DIR=str(tmp_path / "cache"))
    sweep = subprocess.Popen([sys.executable, "-m", "dlperf.cli", "run", str(STUDIES / study), "--db",
                              str(tmp_path / "s.db")], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        victim = wait_for(lambda: ready(marked(mark), tmp), 120)
        assert victim, "the run never reached the moment to kill"
        procs_then, folders_then = leftovers(mark, tmp)
        if not whole_run_gone:  # the victim's own, and what it started: the processes after it in PID order
            procs_then = {pid: cmd for pid, cmd in procs_then.items() if pid >= int(victim)}
            folders_then = [f for f in folders_then if f.startswith("dlperf-torchrun-")]
        os.kill(int(victim), signal.SIGKILL)

        def still() -> tuple[list[int], list[str]]:
            procs, folders = leftovers(mark, tmp)
            return sorted(set(procs) & set(procs_then)), sorted(set(folders) & set(folders_then))

        wait_for(lambda: not any(still()), 10)
        assert not any(still()), f"10 s after SIGKILL of {procs_then.get(int(victim))}: {still()} left of " \
                                 f"{procs_then}, {folders_then}"
        if not whole_run_gone:
            sweep.wait(timeout=180)
        wait_for(lambda: not any(leftovers(mark, tmp)), 10)
        assert not any(leftovers(mark, tmp)), leftovers(mark, tmp)
    finally:
        for pid in marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        sweep.wait(timeout=30)


def _first(procs: dict[int, str], fragment: str) -> int | None:
    return next((pid for pid, cmd in sorted(procs.items()) if fragment in cmd), None)


def _sweep(procs: dict[int, str]) -> int | None:
    return _first(procs, "dlperf.cli run")


@pytest.mark.e2e
def test_sigkill_of_the_sweep_while_collectives_ranks_run(tmp_path):
    kill_during(tmp_path, "collectives_tiny.yaml",
                lambda procs, tmp: _sweep(procs) if _first(procs, "dlperf.distributed.rank") else None)


#: ddp_tiny's two torchrun jobs in the other order: the worker is killed while the two ranks of world size 2 run,
#: and the sweep goes on with the one rank of world size 1 (the other order killed one rank and then ran two: a
#: torch rank's CPU more, with fewer processes to clean up after the kill).
DDP_TWO_THEN_ONE = (STUDIES / "ddp_tiny.yaml").read_text().replace("world_size: [1, 2]", "world_size: [2, 1]")


@pytest.mark.e2e
def test_sigkill_of_the_worker_while_ddp_ranks_run(tmp_path):
    """The worker (torchrun's launcher) killed: the sweep goes on, and its case's torchrun and ranks are gone."""
    assert "world_size: [2, 1]" in DDP_TWO_THEN_ONE  # the shipped study's grid, reordered
    study = tmp_path / "ddp_two_then_one.yaml"
    study.write_text(DDP_TWO_THEN_ONE)
    kill_during(tmp_path, str(study),
                lambda procs, tmp: _first(procs, "dlperf.runner.worker") if _first(procs, "dlperf.distributed.rank")
                else None, whole_run_gone=False)


@pytest.mark.e2e
def test_sigkill_of_the_sweep_while_loadgen_serves(tmp_path):
    kill_during(tmp_path, "readme_serving.yaml",
                lambda procs, tmp: _sweep(procs) if any(tmp.glob("dlperf-loadgen-*")) else None)


def test_the_janitor_removes_what_its_owner_named_when_the_owner_is_killed(tmp_path):
    """The mechanism alone: an owner names two folders and a process group, releases one folder, then dies by
    SIGKILL: the named folder and the group are gone, the released folder stays, the janitor exits."""
    named, released = tmp_path / "named", tmp_path / "released"
    code = ("import os, subprocess, sys, time; from dlperf.core.janitor import *;"
            f"[os.makedirs(d) or watch_folder(d) for d in ({str(named)!r}, {str(released)!r})];"
            f"release_folder({str(released)!r});"
            "child = subprocess.Popen(['sleep', '600'], start_new_session=True); watch_group(child.pid);"
            "print(child.pid, janitor_pid(), flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    child, janitor = (int(x) for x in owner.stdout.readline().split())
    assert named.is_dir() and _running(child) and _running(janitor)
    owner.kill()
    owner.wait()
    gone = wait_for(lambda: not named.exists() and not _running(child) and not _running(janitor), 10)
    assert gone, (sorted(p.name for p in tmp_path.iterdir()), _running(child), _running(janitor))
    assert released.is_dir()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; its parent has not reaped it yet
