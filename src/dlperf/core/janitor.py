"""What a SIGKILLed dlperf process leaves is cleaned up at once, by a small process that outlives it.

A process killed with SIGKILL runs no clean-up: its scratch folders stay in /tmp, and the process groups it
started in their own sessions (a worker, torchrun and its ranks) run on until their own parent-death signal or
time-out ends them (issue 29, finding 7: a rank alive 5 minutes later). So the first time a process makes a
scratch folder or starts such a group, it starts a janitor: `python -c` with the standard library alone, in its
own session (a signal to the owner's group does not reach it), reading from a pipe whose only writer is its
owner. The owner tells it what to clean (`+d PATH`, `+g PGID`) and what it cleaned itself (`-d`, `-g`). The pipe
ends when the owner does, however it ends; the janitor then kills the groups still named, removes the folders
still named, and exits: within a second of a SIGKILL, nothing of the owner's is left. A normal exit leaves it
nothing to do. `core/scratch.py` also removes, on the next run, folders whose owner and janitor both died (a
SIGKILL of the janitor too, or a reboot).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

_SCRIPT = r"""
import os, shutil, signal, sys
folders, groups = set(), set()
for line in sys.stdin:
    op, _, arg = line.rstrip("\n").partition(" ")
    if op == "+d": folders.add(arg)
    elif op == "-d": folders.discard(arg)
    elif op == "+g": groups.add(int(arg))
    elif op == "-g": groups.discard(int(arg))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
for folder in folders:
    shutil.rmtree(folder, ignore_errors=True)
"""

_lock = threading.Lock()
_janitor: subprocess.Popen[bytes] | None = None
_owner_pid: int | None = None


def _send(line: str) -> None:
    """Tell this process's janitor `line`, starting it first where it is not running (or was the parent's)."""
    global _janitor, _owner_pid
    with _lock:
        if _janitor is None or _owner_pid != os.getpid() or _janitor.poll() is not None:
            try:
                _janitor = subprocess.Popen([sys.executable, "-I", "-S", "-c", _SCRIPT], stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True)
            except OSError:
                _janitor = None
                return  # no janitor: the next run's orphan sweep (core/scratch.py) still removes the folders
            _owner_pid = os.getpid()
        assert _janitor.stdin is not None
        try:
            _janitor.stdin.write(line.encode() + b"\n")
            _janitor.stdin.flush()
        except (BrokenPipeError, OSError):
            _janitor = None


def watch_folder(path: str) -> None:
    """Remove `path` if this process dies before `release_folder(path)`."""
    _send(f"+d {path}")


def release_folder(path: str) -> None:
    _send(f"-d {path}")


def watch_group(pgid: int) -> None:
    """SIGKILL process group `pgid` if this process dies before `release_group(pgid)`."""
    _send(f"+g {pgid}")


def release_group(pgid: int) -> None:
    _send(f"-g {pgid}")


def janitor_pid() -> int | None:
    """This process's janitor's PID, None where none runs (for tests)."""
    with _lock:
        return _janitor.pid if _janitor is not None and _owner_pid == os.getpid() else None
