"""Scratch folders of dlperf's processes (`/tmp/dlperf-worker-*`, `/tmp/dlperf-torchrun-*`) that a SIGKILL cannot
leave behind for good: each names its owner (PID and the PID's start time, against PID reuse) in a file, and
every new one first removes the folders of its prefix whose owner is gone. A process killed with SIGKILL runs no
clean-up of its own (nor do its workers and ranks, which die with it), so the next run of dlperf does it."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dlperf.core.janitor import release_folder, watch_folder

#: The file in a scratch folder that names its owner: "PID START" (START: the process's start time in clock
#: ticks since boot, /proc/PID/stat's field 22).
OWNER_FILE = ".dlperf-owner"


def _started(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot); None where it does not exist (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # after the command's name, which may hold spaces


def _owner_gone(folder: Path) -> bool:
    """Whether the process that made `folder` is gone (dead, or its PID now another process's); False where
    the folder names no owner (made by another program, or an older dlperf: left alone)."""
    try:
        pid_text, started = (folder / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    return _started(pid) != started


def remove_orphans(prefix: str, parent: Path | None = None) -> list[Path]:
    """Remove the scratch folders `PARENT/PREFIX*` whose owner is gone; return them."""
    removed = []
    for folder in Path(parent or tempfile.gettempdir()).glob(f"{prefix}*"):
        if folder.is_dir() and not folder.is_symlink() and _owner_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    return removed


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A new private temporary folder `TMP/PREFIX*` that names its owner, made after removing the folders of
    `prefix` left by owners that are gone, and removed when the block ends.

    Its janitor (core/janitor.py) is told of it before it exists: a SIGKILL while it was being made (the janitor
    starts on the process's first folder, which on a busy machine takes a while) left a folder named by no one,
    not even an owner file, that nothing removed (a LoadGen worker's, killed with its run)."""
    with contextlib.suppress(OSError):
        remove_orphans(prefix)
    parent = tempfile.gettempdir()
    while True:
        tmp = os.path.join(parent, prefix + secrets.token_hex(6))
        watch_folder(tmp)  # removed (if made by then) should this process die from here on
        try:
            os.mkdir(tmp, 0o700)
            break
        except FileExistsError:
            release_folder(tmp)  # another's: left alone, another name drawn
    try:
        started = _started(os.getpid())
        if started is not None:
            Path(tmp, OWNER_FILE).write_text(f"{os.getpid()} {started}\n")
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        release_folder(tmp)
