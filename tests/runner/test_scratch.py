"""Scratch folders a SIGKILL left behind (`/tmp/dlperf-worker-*`, `/tmp/dlperf-torchrun-*`) are removed by the next
one made: those whose owner (PID and start time in the folder) is gone; live owners' and unowned folders stay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dlperf.core.scratch import OWNER_FILE, _started, remove_orphans, scratch_dir


def _folder(parent: Path, name: str, owner: str | None) -> Path:
    folder = parent / name
    folder.mkdir()
    (folder / "spec.json").write_text("{}")
    if owner is not None:
        (folder / OWNER_FILE).write_text(owner)
    return folder


def test_only_the_folders_of_gone_owners_are_removed(tmp_path: Path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = f"{os.getpid()} {_started(os.getpid())}\n"
    gone = _folder(tmp_path, "dlperf-worker-gone", f"{dead.pid} 1\n")
    reused = _folder(tmp_path, "dlperf-worker-reused", f"{os.getpid()} 1\n")  # this PID, another start time
    live = _folder(tmp_path, "dlperf-worker-live", me)
    unowned = _folder(tmp_path, "dlperf-worker-old", None)
    other = _folder(tmp_path, "dlperf-torchrun-gone", f"{dead.pid} 1\n")
    assert sorted(remove_orphans("dlperf-worker-", tmp_path)) == sorted([gone, reused])
    assert not gone.exists() and not reused.exists()
    assert live.exists() and unowned.exists() and other.exists()


def test_a_scratch_folder_names_its_owner_and_is_removed_after(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    stale = _folder(tmp_path, "dlperf-torchrun-stale", "999999999 1\n")
    with scratch_dir("dlperf-torchrun-") as tmp:
        assert Path(tmp).parent == tmp_path and not stale.exists()
        assert (Path(tmp) / OWNER_FILE).read_text() == f"{os.getpid()} {_started(os.getpid())}\n"
    assert not Path(tmp).exists()


def test_the_janitor_is_told_of_a_scratch_folder_before_it_exists(tmp_path: Path, monkeypatch):
    """A SIGKILL while the folder was being made (the janitor starts on a process's first folder) left it named by
    no one; the janitor now hears of it first, and of its release only once it is gone. A name already taken is
    released and another drawn."""
    import tempfile

    from dlperf.core import scratch

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    told: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(scratch, "watch_folder", lambda p: told.append(("+d", p, os.path.exists(p))))
    monkeypatch.setattr(scratch, "release_folder", lambda p: told.append(("-d", p, os.path.exists(p))))
    taken = tmp_path / "dlperf-worker-aaaaaaaaaaaa"
    taken.mkdir()
    names = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(scratch.secrets, "token_hex", lambda _n: next(names))
    with scratch_dir("dlperf-worker-") as tmp:
        assert tmp == str(tmp_path / "dlperf-worker-bbbbbbbbbbbb") and os.path.isdir(tmp)
    assert told == [("+d", str(taken), True), ("-d", str(taken), True),  # another's: left, not removed
                    ("+d", tmp, False), ("-d", tmp, False)]
    assert taken.exists() and not os.path.exists(tmp)
