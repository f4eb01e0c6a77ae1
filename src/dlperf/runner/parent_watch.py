"""A worker's tie to the sweep that started it: SIGKILLed when its parent dies, gone at once if the sweep is.

Its own module so that the worker's job (worker.py) stays about measuring; the ranks of a distributed job
have their own check (distributed/rank.py: their parent is torchrun)."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this worker if its parent dies (e.g. the sweep, by SIGKILL).

    The parent is the sweep, or a profiler the sweep wrapped the worker in (ncu: `run_worker(wrap=...)`); the
    sweep has its process group killed with it either way. Exit at once only when the sweep itself is gone
    (it died before prctl took effect): a parent that is not the sweep while the sweep lives is the wrapper.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the parent's own cleanup still kills workers it knows of
    if os.getppid() != parent_pid and not _alive(parent_pid):
        os._exit(1)


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
