"""A store a command cannot use as it is: one line and exit 2, nothing written (a read-only store, a
schema_version dlperf did not write), while read commands still read what they can.

Read-only, as the tests see it: the suite may run as root, which chmod does not stop, so the store is
opened through SQLite's own read-only mode (`sqlite:///file:PATH?mode=ro&uri=true`), which refuses every
write whoever runs it; SQLite reports the same error ('attempt to write a readonly database') for a file
or folder without write permission. A WAL store in a read-only folder cannot even be read (SQLite must
create its -shm file); checked by hand as an unprivileged user, and here through the error's handler."""

from __future__ import annotations

import shutil
import sqlite3
from types import SimpleNamespace

import pytest

from dlperf.errors import StoreError
from dlperf.store.engines import sqlite_error_handler
from tests.cli.conftest import assert_one_line_error
from tests.conftest import STUDIES


def _rows(db) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM results").fetchone()[0]


@pytest.fixture
def store_copy(two_runs, tmp_path):
    db = tmp_path / "copy.sqlite"
    shutil.copy(two_runs[0], db)
    return db


@pytest.mark.parametrize("query", ["mode=ro", "immutable=1"])
def test_read_commands_read_a_read_only_store(dlperf_main, store_copy, query):
    url = f"sqlite:///file:{store_copy}?{query}&uri=true"
    for command in (["runs"], ["show", "latest"], ["report", "latest"], ["export", "latest"]):
        res = dlperf_main(*command, "--db", url)
        assert res.returncode == 0 and res.stderr == "", (command, res.stderr)
    assert "many_ok-" in dlperf_main("runs", "--db", url).stdout


@pytest.mark.parametrize("command", [["run", str(STUDIES / "many_ok.yaml")], ["peaks", "--quick"],
                                     ["maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p", "seq_len=8",
                                      "--framework", "numpy"]])
def test_a_command_that_writes_says_the_store_is_read_only(dlperf_main, store_copy, command):
    before = _rows(store_copy)
    res = dlperf_main(*command, "--db", f"sqlite:///file:{store_copy}?mode=ro&uri=true")
    assert_one_line_error(res, f"database {store_copy} is read-only", "nothing was written")
    assert res.returncode == 2 and "INSERT" not in res.stderr and "UPDATE" not in res.stderr
    assert _rows(store_copy) == before


def test_a_read_only_wal_store_that_cannot_be_read_says_how_to_read_it(tmp_path):
    """What a read of a WAL store in a read-only folder raises (SQLite cannot create its -shm)."""
    path = tmp_path / "r.sqlite"
    handler = sqlite_error_handler(f"sqlite:///{path}")
    failed_read = SimpleNamespace(original_exception=sqlite3.OperationalError("attempt to write a readonly database"),
                                  statement="SELECT name FROM sqlite_master")
    with pytest.raises(StoreError) as err:
        handler(failed_read)
    msg = str(err.value)
    assert msg.startswith(f"cannot read database {path}: it is read-only and in WAL mode") and "\n" not in msg
    assert f"--db 'sqlite:///file:{path}?immutable=1&uri=true'" in msg and "r.sqlite-shm" in msg
    other = SimpleNamespace(original_exception=sqlite3.OperationalError("database is locked"), statement="SELECT 1")
    assert handler(other) is None  # other errors are not its business


@pytest.mark.parametrize("value", ["abc", "", "2.5", "-1"])
def test_an_unreadable_schema_version_is_one_line(dlperf_main, store_copy, value):
    with sqlite3.connect(store_copy) as conn:
        conn.execute("UPDATE dlperf_meta SET value=? WHERE key='schema_version'", (value,))
    before = _rows(store_copy)
    for command in (["runs"], ["show", "latest"], ["run", str(STUDIES / "many_ok.yaml")]):
        res = dlperf_main(*command, "--db", str(store_copy))
        assert_one_line_error(res, f"has an unreadable schema_version {value!r}", "not written by dlperf, or is "
                                   "damaged")
        assert res.returncode == 2
    assert _rows(store_copy) == before
