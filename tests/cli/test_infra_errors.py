"""A full disk under a command (store.failures): one `dlperf: error:` line with its own exit code (74), never
SQL or SQLAlchemy's background link, nothing half-written, and a run stopped by it resumed whole.

The disk is made full for real, without root or a mount: SQLite's `max_page_count` (set on every connection
the store opens) makes the database full at that size, which is SQLITE_FULL, the error a full disk gives; an
output file is written under a file size limit (RLIMIT_FSIZE: the kernel's EFBIG) or to /dev/full (ENOSPC).
The database cases of the PostgreSQL server are in tests/runner/test_postgres_faults.py."""

from __future__ import annotations

import errno
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf.errors import DiskFullError, PermissionDeniedError
from dlperf.store import Store
from dlperf.store.failures import database_error, os_error
from tests.cli.conftest import assert_one_line_error
from tests.conftest import STUDIES, CliResult

#: `dlperf ARGS` in a process of its own whose store connections all have SQLite's max_page_count $PAGES.
FULL_AT_PAGES = """
import os, sys
from dlperf.store import engines
plain = engines.sqlite_pragmas
def pragmas(conn, record, busy_timeout_ms=engines.BUSY_TIMEOUT_MS):
    plain(conn, record, busy_timeout_ms)
    conn.execute(f"PRAGMA max_page_count={int(os.environ['PAGES'])}")
engines.sqlite_pragmas = pragmas
from dlperf.cli import main
main(sys.argv[1:])
"""
#: Six trivial faults cases (tests/studies/six_ok.yaml): nothing is measured before the run (no ceilings, whose
#: curve makes the run row larger), and each result takes about one 4 KiB page.
SIX = (STUDIES / "six_ok.yaml").read_text()


#: Two of those cases: where a test needs a complete run, not room for a part of one (the run refused at its
#: creation and started later, the store the output tests read; each of their outputs is still far over its limit).
TWO = SIX.replace("name: six_ok", "name: two_ok").replace("chunk_mb: [1, 2, 3, 4, 5, 6]", "chunk_mb: [1, 2]")


def _study_and_store(folder: Path, text: str) -> tuple[Path, Path]:
    """The study `text` in `folder`, and a new empty store (created, so that its size is known)."""
    study, db = folder / "study.yaml", folder / "r.sqlite"
    study.write_text(text)
    Store(db).engine.dispose()
    return study, db


@pytest.fixture
def six(tmp_path: Path) -> tuple[Path, Path]:
    """The six-case study, and a new empty store."""
    return _study_and_store(tmp_path, SIX)


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    """The two-case study, and a new empty store."""
    return _study_and_store(tmp_path, TWO)


def _run_full_at(study: Path, db: Path, pages: int) -> CliResult:
    proc = subprocess.run([sys.executable, "-c", FULL_AT_PAGES, "run", str(study), "--db", str(db)],
                          capture_output=True, text=True, cwd=db.parent, env=dict(os.environ, PAGES=str(pages)))
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _pages(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("PRAGMA page_count").fetchone()[0]


def _stored(db: Path) -> tuple[list[str], int, int]:
    """The runs' ids, the results and their distinct case-repetitions."""
    with sqlite3.connect(db) as conn:
        found = [r[0] for r in conn.execute("SELECT id FROM runs")]
        n, distinct = conn.execute("SELECT count(*), count(DISTINCT case_key || '#' || repetition) FROM results"
                                   ).fetchone()
    return found, n, distinct


def _assert_disk_full_line(res: CliResult) -> None:
    assert_one_line_error(res, "is full (database or disk is full)", "the same command run again resumes")
    assert res.returncode == 74
    assert "INSERT" not in res.stderr and "sqlalche.me" not in res.stderr and "Background" not in res.stderr


def test_a_full_disk_at_run_creation_is_one_line_and_the_run_starts_later(dlperf_main, two):
    study, db = two
    _assert_disk_full_line(_run_full_at(study, db, _pages(db)))
    assert _stored(db) == ([], 0, 0)
    assert dlperf_main("run", str(study), "--db", str(db)).returncode == 0  # space freed
    (run_id,), n, distinct = _stored(db)
    assert n == distinct == 2 and dlperf_main("show", run_id, "--db", str(db)).returncode == 0


def test_a_disk_full_mid_run_is_one_line_and_a_resume_stores_every_case_once(dlperf_main, six):
    study, db = six
    _assert_disk_full_line(_run_full_at(study, db, _pages(db) + 4))  # room for the run and a few results
    (run_id,), stored_first, _ = _stored(db)
    assert 0 < stored_first < 6
    res = dlperf_main("run", str(study), "--db", str(db))
    assert res.returncode == 0 and f"resuming run {run_id}" in res.stdout + res.stderr
    assert _stored(db) == ([run_id], 6, 6)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchone()[0] == "complete"


def _limited(max_bytes: int):
    """A child's file size limit: a write past it fails with EFBIG (SIGXFSZ ignored, as a shell's may be)."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return apply


@pytest.fixture(scope="module")
def immutable_store(tmp_path_factory) -> str:
    """A store with one run of the study, opened immutable (a read writes nothing, not even a -shm file)."""
    folder = tmp_path_factory.mktemp("full")
    (folder / "two.yaml").write_text(TWO)
    db = folder / "r.sqlite"
    subprocess.run([sys.executable, "-m", "dlperf", "run", str(folder / "two.yaml"), "--db", str(db)], check=True,
                   capture_output=True)
    return f"sqlite:///file:{db}?immutable=1&uri=true"


@pytest.mark.parametrize(("command", "name", "max_bytes"), [
    (["history", "two_ok", "--format", "json"], "h.json", 1024),
    (["report", "latest", "--format", "markdown"], "r.md", 1024),
    (["report", "latest", "--format", "html"], "r.html", 8192),
])
def test_an_output_that_does_not_fit_leaves_no_file(immutable_store, tmp_path, command, name, max_bytes):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-m", "dlperf", *command, "--db", immutable_store, "-o", str(out / name)],
                          capture_output=True, text=True, cwd=tmp_path, preexec_fn=_limited(max_bytes))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 74 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("dlperf: error: ") and "(File too large)" in lines[0]
    assert list(out.iterdir()) == []  # no empty, cut or temporary file
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size == 0]
    assert leftovers == []


def test_an_output_to_a_full_device_is_one_line(immutable_store, tmp_path):
    if not Path("/dev/full").exists():
        pytest.fail("/dev/full is missing: Linux has it")
    proc = subprocess.run([sys.executable, "-m", "dlperf", "history", "two_ok", "--format", "json", "--db",
                           immutable_store, "-o", "/dev/full"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 74 and proc.stderr.strip() == (
        "dlperf: error: /dev/full: cannot write (No space left on device): free space on its disk, or write "
        "elsewhere; nothing was left half-written")
    assert Path("/dev/full").is_char_device()  # written into, never replaced


def test_a_refused_permission_is_its_own_exit_code():
    try:  # sysfs refuses a new file even to root
        open("/sys/kernel/dlperf-test.tmp", "w").close()
    except OSError as exc:
        err = os_error(exc, "/sys/kernel/x")
    else:
        pytest.fail("/sys/kernel accepted a new file")
    assert isinstance(err, PermissionDeniedError) and err.exit_code == 77
    assert isinstance(os_error(OSError(errno.ENOSPC, "No space left on device"), "f"), DiskFullError)
    assert os_error(OSError(errno.ENOENT, "No such file or directory"), "f") is None  # not the system's failure
    full = database_error(sqlite3.OperationalError("database or disk is full"), "sqlite:////tmp/s.sqlite")
    assert isinstance(full, DiskFullError) and str(full).startswith("database /tmp/s.sqlite is full")
    assert database_error(sqlite3.IntegrityError("UNIQUE constraint failed"), "sqlite:////tmp/s.sqlite") is None
