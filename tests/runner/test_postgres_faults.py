"""A PostgreSQL store that fails under a command (store.failures), against the suite's real server: a database
or a role that does not exist, a server not listening, a table the role may not read, and the server stopped
in the middle of a run. Each is one `dlperf: error:` line with its exit code (69: unavailable, 77: permission
denied), no SQL and no SQLAlchemy background link; the stopped run is resumed whole once the server is back."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from dlperf.store import Store
from tests.conftest import STUDIES, CliResult, run_cli
from tests.postgres_server import new_database, start_server, stop_server

pytestmark = pytest.mark.postgres

STUDY = STUDIES / "six_ok.yaml"  # six trivial faults cases (the file says why)


def _one_line(res: CliResult, code: int, *fragments: str) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == code and len(lines) == 1, (res.returncode, res.stderr)
    assert lines[0].startswith("dlperf: error: ") and "Traceback" not in res.stderr
    for bad in ("sqlalche.me", "Background on this error", "SELECT", "INSERT", "[SQL"):
        assert bad not in res.stderr, res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _with(url: str, **parts: object) -> str:
    return make_url(url).set(**parts).render_as_string(hide_password=False)


def test_a_database_that_does_not_exist(postgres_url):
    url = _with(postgres_url, database="no_such_db")
    for command in (["runs"], ["history", "x"]):
        _one_line(run_cli(*command, "--db", url), 69, 'database "no_such_db" does not exist', "create it")


def test_an_unknown_role_and_its_password_unshown(postgres_url):
    url = _with(postgres_url, username="nobody_here", password="s3cret")
    res = run_cli("runs", "--db", url)
    _one_line(res, 69, "refused the login", 'role "nobody_here" does not exist')
    assert "s3cret" not in res.stderr


def test_a_server_that_is_not_listening(postgres_url):
    url = make_url(postgres_url)
    url = url.set(query={**url.query, "port": "1"})  # nothing listens there
    _one_line(run_cli("runs", "--db", url.render_as_string(hide_password=False)), 69, "cannot reach database",
              "start its server")


def test_a_role_without_access_is_permission_denied(postgres_url):
    url = new_database(postgres_url)
    Store(url).engine.dispose()  # a store, owned by the superuser
    role = f"r_{secrets.token_hex(4)}"
    engine = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
    engine.dispose()
    _one_line(run_cli("runs", "--db", _with(url, username=role)), 77, "permission denied", "grant this user access")


def _results(url: str) -> tuple[int, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(text(
                "SELECT count(*), count(DISTINCT case_key || '#' || repetition) FROM results")).one())
    finally:
        engine.dispose()


def test_the_server_stopped_mid_run_then_a_resume_stores_every_case_once(postgres_url, tmp_path: Path):
    url = new_database(postgres_url)
    Store(url).engine.dispose()
    proc = subprocess.Popen([sys.executable, "-m", "dlperf", "run", str(STUDY), "--db", url], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="200"))
    try:
        deadline = time.monotonic() + 120
        while _results(url)[0] < 1:  # the run is under way: a case is stored
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        stop_server()
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            start_server()
    finally:
        if proc.poll() is None:
            proc.kill()
    _one_line(CliResult(proc.returncode, out, err), 69, "cannot reach database", "start its server",
              "the same command run again resumes")
    stored_first = _results(url)[0]
    assert 1 <= stored_first < 6
    res = run_cli("run", str(STUDY), "--db", url)
    assert res.returncode == 0 and "resuming run" in res.stdout + res.stderr, res.stderr
    assert _results(url) == (6, 6)
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT status FROM runs")).scalars().all() == ["complete"]
    engine.dispose()
