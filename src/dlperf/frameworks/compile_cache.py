"""Compiler cache folders: one new, empty folder per case for a compiler's on-disk cache (inductor's, JAX's
persistent compilation cache, TensorFlow's XLA cache), and what was written in it.

A folder is `$TMPDIR/dlperf-compile-*` (`core.scratch`: it names its owner), removed when the process that made it
exits, or by the next dlperf where that process was killed; no two cases or repetitions share one. A cold compile
runs on a new folder, a warm one in a second fresh process on the folder as the cold one left it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dlperf.core.scratch import OWNER_FILE, scratch_dir

#: The prefix of a case's compiler cache folder (under the temporary folder, `core.scratch`).
CACHE_PREFIX = "dlperf-compile-"

_KEPT = contextlib.ExitStack()  # the cache folders of this process, removed when it exits
atexit.register(_KEPT.close)

#: A file's identity and last write: (inode, mtime in ns); a file rewritten (written anew and moved into place,
#: or written in place) changes one of them.
Stamp = tuple[int, int]


def cache_folder() -> Path:
    """A new, empty folder for one case's compiler caches, kept until this process exits."""
    return Path(_KEPT.enter_context(scratch_dir(CACHE_PREFIX)))


def files_in(folder: Path) -> int:
    """Files under `folder` (0 where it does not exist), less the scratch folder's owner file."""
    return len(stamps(folder))


def stamps(folder: Path) -> dict[str, Stamp]:
    """Each file under `folder` (its path relative to it) with its `Stamp`; the owner file left out."""
    out: dict[str, Stamp] = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root, name)
            if name == OWNER_FILE and path.parent == folder:
                continue
            with contextlib.suppress(OSError):  # gone between the listing and the stat
                st = path.stat()
                out[str(path.relative_to(folder))] = (st.st_ino, st.st_mtime_ns)
    return out


def written(before: dict[str, Stamp], after: dict[str, Stamp]) -> int:
    """Files new or rewritten in `after` against `before`."""
    return sum(1 for name, stamp in after.items() if before.get(name) != stamp)


def run_warm(argv: list[str], env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    """The warm compile's figures: the last JSON line a fresh process `argv` prints, or `{"warm_error": why}`
    (it timed out, failed, or printed none)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"warm_error": f"the warm compile took over {timeout_s:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        said = done.stderr.strip().splitlines()
        return {"warm_error": said[-1] if said else f"the warm compile's process exited {done.returncode}"}
    out: dict[str, Any] = json.loads(lines[-1])
    return out


def warm_main(figures: Callable[[list[str]], Mapping[str, Any]], argv: list[str]) -> int:
    """A warm-compile process's ending (what `run_warm` reads): `figures(argv)` as one JSON line and exit 0, or
    what it raised as one line on stderr and exit 1."""
    try:
        out = figures(argv)
    except Exception as exc:
        print(f"the warm compile raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0
