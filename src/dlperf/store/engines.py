"""The store's database connections: SQLite's settings, the lock that migrations run under, and the one-line
errors of a read-only SQLite store.

Several processes may open one store at once (two users' `dlperf run`, a `show` beside a sweep). SQLite
waits for a busy store (busy_timeout, set before anything else), keeps foreign keys and runs in WAL mode;
a schema migration runs on a connection of its own whose transactions begin with BEGIN IMMEDIATE (taking
the write lock at once, the pysqlite recipe of SQLAlchemy's documentation); on PostgreSQL it holds an
advisory transaction lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.pool import NullPool

from dlperf.errors import StoreError
from dlperf.store.urls import sqlite_path

#: The PostgreSQL advisory lock that serialises schema migrations ('dlperf' in ASCII).
PG_MIGRATION_LOCK = 0x646C70657266
#: How long a SQLite connection waits for another's lock; a migration waits longer.
BUSY_TIMEOUT_MS, MIGRATION_BUSY_TIMEOUT_MS = 10_000, 60_000


def sqlite_pragmas(dbapi_conn: Any, _record: Any, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Wait for a busy store rather than fail (first: switching a new store to WAL takes a lock), keep
    foreign keys, and use WAL so that readers (show/report) never block a running sweep."""
    import sqlite3

    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    cur.execute("PRAGMA foreign_keys=ON")
    try:
        if _dlperf_or_empty(cur):  # another program's database is refused as it is, its journal mode untouched
            cur.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError:
        pass  # a read-only store keeps its journal mode; a read or a write then says what is wrong
    cur.close()


def _dlperf_or_empty(cur: Any) -> bool:
    """Whether the database has no table, or dlperf's meta table (then it is, or will become, a store)."""
    tables = {row[0] for row in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return not tables or "dlperf_meta" in tables


def _migration_connect(dbapi_conn: Any, record: Any) -> None:
    """pysqlite emits no BEGIN of its own (the engine's `begin` event emits BEGIN IMMEDIATE)."""
    dbapi_conn.isolation_level = None
    sqlite_pragmas(dbapi_conn, record, busy_timeout_ms=MIGRATION_BUSY_TIMEOUT_MS)


def sqlite_error_handler(url: str) -> Callable[[Any], None]:
    """A `handle_error` listener: a read-only SQLite store is one line that says so and how to read it,
    never the SQL and its parameters."""
    path = sqlite_path(url) or url

    def handle(context: Any) -> None:
        orig = context.original_exception
        if "readonly database" not in str(orig):
            return
        statement = (context.statement or "").lstrip().upper()
        if statement.startswith(("SELECT", "PRAGMA")):
            raise StoreError(
                f"cannot read database {path}: it is read-only and in WAL mode, and SQLite cannot create its "
                f"{Path(str(path)).name}-shm beside it; make its folder writable, read a copy, or open it with "
                f"--db 'sqlite:///file:{path}?immutable=1&uri=true'; nothing was written to it") from None
        raise StoreError(f"database {path} is read-only ({orig}): nothing was written to it; give a writable "
                         f"--db, or make the file and its folder writable") from None

    return handle


def infrastructure_handler(url: str) -> Callable[[Any], None]:
    """A `handle_error` listener: a database unreachable, missing, full or refusing access becomes one
    user-facing line (store.failures), never the driver's text with its SQL."""
    from dlperf.store.failures import database_error

    def handle(context: Any) -> None:
        err = database_error(context.original_exception, url, is_disconnect=context.is_disconnect)
        if err is not None:
            raise err from None

    return handle


def open_engine(url: str) -> Engine:
    """The store's engine for `url`, with SQLite's settings and errors where it is SQLite, and every
    dialect's infrastructure failures as one line."""
    engine = create_engine(url, future=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", sqlite_pragmas)
        event.listen(engine, "handle_error", sqlite_error_handler(url))
    event.listen(engine, "handle_error", infrastructure_handler(url))
    return engine


@contextlib.contextmanager
def migration_lock(engine: Engine) -> Iterator[Connection]:
    """A transaction that holds the store's migration lock until it ends (other migrating processes wait)."""
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        url = engine.url.render_as_string(hide_password=False)
        locked = create_engine(url, poolclass=NullPool)  # a connection of its own
        event.listen(locked, "connect", _migration_connect)
        event.listen(locked, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        event.listen(locked, "handle_error", sqlite_error_handler(url))
        event.listen(locked, "handle_error", infrastructure_handler(url))
        try:
            with locked.begin() as conn:
                yield conn
        finally:
            locked.dispose()
        return
    with engine.begin() as conn:  # an in-memory SQLite store is this process's alone: no lock to take
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})
        yield conn
