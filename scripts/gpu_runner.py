"""How `make gpu-check` runs one step (`Check.step`: a command with its time-out, its log, its outcome recorded
at once) and the small facts it needs before anything is installed (the GPUs, the git commit, a store's runs).

Standard library only, like gpu_check.py, which imports it (scripts/ is not a package: found on sys.path).
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpu_evidence import StepOutcome

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
#: Seconds between SIGTERM and SIGKILL when a step runs past its time-out.
GRACE_S = 30


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def detect_gpus(nvidia_smi: str | None) -> tuple[list[str], str]:
    """The NVIDIA GPUs' names from nvidia-smi, or ([], why there is none)."""
    if not nvidia_smi or not Path(nvidia_smi).exists():
        return [], "nvidia-smi is not installed"
    try:
        res = subprocess.run([nvidia_smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi did not answer ({exc})"
    lines = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    if res.returncode != 0 or not lines:
        said = (res.stdout + res.stderr).strip().splitlines()
        return [], f"nvidia-smi exited {res.returncode}" + (f": {said[0][:160]}" if said else " and listed no GPU")
    return lines, ""


class Check:
    """One invocation: runs steps, records their outcomes, writes the README."""

    def __init__(self, out: Path, python: str, commit: str, env: dict[str, str], root: Path = ROOT) -> None:
        self.out, self.python, self.commit, self.env = out, python, commit, env
        self.root = root  # the working folder of every step: the repository
        self.outcomes: list[StepOutcome] = []
        self.saver: Callable[[], None] | None = None  # writes steps.json and the README after each step

    def record(self, outcome: StepOutcome) -> StepOutcome:
        """Keep an outcome and write the evidence's state at once, so that a job cut short still leaves it."""
        self.outcomes.append(outcome)
        if self.saver:
            self.saver()
        return outcome

    def rel(self, path: Path) -> str:
        """A path as the README and the commands show it: from the repository root where it lies inside."""
        path = path.resolve() if not path.is_absolute() else path
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def step(self, name: str, cmd: list[str], timeout_s: float, log: Path, *, stdout: Path | None = None,
             env: dict[str, str] | None = None) -> StepOutcome:
        """Run `cmd` from the repository root, output to `log` (stdout to `stdout` if given), stopped at
        `timeout_s`: SIGTERM to its process group (dlperf stores what finished), SIGKILL after GRACE_S."""
        log.parent.mkdir(parents=True, exist_ok=True)
        shown = shlex.join(cmd) + (f" > {self.rel(stdout)}" if stdout else "")
        started, t0 = now_utc(), time.monotonic()
        timed_out, status, note = False, None, ""
        with open(log, "w", encoding="utf-8") as err, open(stdout or os.devnull, "w", encoding="utf-8") as std:
            try:
                proc = subprocess.Popen(cmd, cwd=self.root, stdout=std if stdout else err, stderr=err,
                                        env=env or self.env, start_new_session=True)
            except OSError as exc:
                note = f"could not start: {exc}"
            else:
                try:
                    status = proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _stop(proc)
                    note = f"stopped after {timeout_s:g} s (SIGTERM, SIGKILL {GRACE_S} s later if still running)"
        kept = log.exists() and log.stat().st_size > 0
        if not kept:
            log.unlink(missing_ok=True)  # nothing was said: no empty file in the evidence
        outcome = StepOutcome(name, shown, started, round(time.monotonic() - t0, 1), status, self.commit,
                              timeout_s=timeout_s, timed_out=timed_out,
                              log=log.relative_to(self.out).as_posix() if kept else None, note=note)
        self.record(outcome)
        print(f"gpu-check: {name}: {'FAILED' if outcome.failed else 'ok'} ({outcome.duration_s:.0f} s)", flush=True)
        return outcome

    def dlperf(self, *args: str) -> list[str]:
        return [self.python, "-m", "dlperf.cli", *args]


def _stop(proc: subprocess.Popen) -> None:
    """End the process group this check started for one step (and only that one)."""
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_ids(store: Path) -> set[str]:
    """The run ids in a dlperf SQLite store (none if it does not exist yet)."""
    if not store.exists():
        return set()
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {row[0] for row in con.execute("SELECT id FROM runs")}
    except sqlite3.Error:  # a store that dlperf could not set up: no run in it
        return set()
    finally:
        con.close()


def guarded(check: Check, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """Run one part of the check; a bug or an unreadable file in it is recorded as a failed step, and the
    check goes on to write its README."""
    try:
        return fn(check, *args, **kwargs)
    except Exception as exc:
        check.outcomes.append(StepOutcome(name, "(gpu_check.py itself)", now_utc(), 0.0, None, check.commit,
                                          failed_anyway=True, note=f"gpu_check.py raised {type(exc).__name__}: {exc}"))
        print(f"gpu-check: {name}: FAILED inside gpu_check.py ({type(exc).__name__}: {exc})", flush=True)
        return None


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (git did not answer)"
    if sha.returncode != 0:
        return "unknown (not a git checkout)"
    return sha.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


__all__ = ["GRACE_S", "Check", "detect_gpus", "git_commit", "guarded", "now_utc", "run_ids"]
