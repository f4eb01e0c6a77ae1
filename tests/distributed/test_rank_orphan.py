"""A rank whose torchrun ended before the rank's PR_SET_PDEATHSIG took effect (its worker SIGKILLed while torchrun
started ranks) exits at once instead of waiting in init_process_group for minutes (issue 29, finding 7): after
setting the signal it checks that its parent is still torchrun. Real processes: a parent that exits at once
leaves its child to init; a parent whose command line is torchrun's keeps it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

#: The parent: starts the child (the `rank`) and either exits at once or waits for it. argv[1]: the child's
#: marker file; argv[2]: "exit" or "wait"; the rest makes the parent's command line look like torchrun's.
PARENT = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", CHILD, sys.argv[1], str(os.getpid())])
if sys.argv[2] == "wait":
    child.wait()
"""
#: The child (argv[1]: the marker file, argv[2]: its parent's PID): once that parent is gone (or at once, where
#: it waits), it sets the death signal as a rank does and writes "survived" if that returns.
CHILD = """
import os, sys, time
from pathlib import Path
if Path(sys.argv[1] + ".orphan").exists():
    while os.getppid() == int(sys.argv[2]):
        time.sleep(0.01)
from dlperf.distributed.rank import die_with_parent
Path(sys.argv[1] + ".pid").write_text(str(os.getpid()))
die_with_parent()
Path(sys.argv[1]).write_text("survived")
"""


def _child_outcome(tmp_path: Path, mode: str, *extra: str) -> str | None:
    marker = tmp_path / f"{mode}.txt"
    if mode == "exit":
        Path(str(marker) + ".orphan").write_text("")
    code = PARENT.replace("CHILD", repr(CHILD))
    subprocess.run([sys.executable, "-c", code, str(marker), mode, *extra], check=True, timeout=60)
    pid_file = Path(str(marker) + ".pid")
    deadline = time.monotonic() + 60
    while not pid_file.exists():  # the child reached die_with_parent (an orphan, in "exit" mode)
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    while Path(f"/proc/{pid_file.read_text()}").exists():  # it ends: exits, or writes its marker and ends
        assert time.monotonic() < deadline, "the child never ended"
        time.sleep(0.05)
    return marker.read_text() if marker.exists() else None


def test_a_rank_orphaned_before_its_death_signal_exits(tmp_path):
    assert _child_outcome(tmp_path, "exit") is None


def test_a_rank_under_torchrun_carries_on(tmp_path):
    assert _child_outcome(tmp_path, "wait", "-m", "torch.distributed.run") == "survived"
