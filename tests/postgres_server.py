"""A throwaway PostgreSQL server for the tests that need a real one (the store's PostgreSQL path, and
concurrency: leases, migrations under many processes).

One server per test session, started from Debian's `postgresql` package (`make test` installs it where its
server binaries are missing: scripts/ensure_postgres.sh) on a Unix socket in a temporary directory (no TCP
port, nothing shared with the machine). Where the binaries or psycopg are missing the tests are skipped with
the reason, unless DLPERF_REQUIRE_POSTGRES=1 (set by `make test`): then they fail, so that CI never passes
by skipping them.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import NoReturn

import pytest

from tests.requirements import unavailable


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server program on PATH or in Debian's /usr/lib/postgresql/VERSION/bin (newest)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return candidates[-1] if candidates else None


def _unavailable(reason: str) -> NoReturn:
    """Skip with the reason; fail instead where DLPERF_REQUIRE_POSTGRES=1 (CI must not skip these)."""
    unavailable(reason, "DLPERF_REQUIRE_POSTGRES")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The SQLAlchemy URL of the `postgres` database of a fresh server (see `new_database` for more)."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        _unavailable("PostgreSQL server binaries (initdb, pg_ctl) are not installed "
                     "(Debian: apt-get install postgresql; `make test` does it as root)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed: pip install -e '.[postgres]'")
    base = tempfile.mkdtemp(prefix="dlperf-pg-", dir="/tmp")
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: use the postgres system user
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no 'postgres' user to run the server")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(base, "data"), "54329"
    subprocess.run([*run_as, initdb, "-D", data, "-A", "trust", "-U", "dlperf"], check=True, capture_output=True)
    _SERVER["start"] = [*run_as, pg_ctl, "-D", data, "-w", "-l", os.path.join(base, "log"), "-o",
                        f"-k {base} -c listen_addresses='' -p {port} -c max_connections=200", "start"]
    _SERVER["stop"] = [*run_as, pg_ctl, "-D", data, "-w", "-m", "fast", "stop"]
    start_server()
    try:
        yield f"postgresql+psycopg://dlperf@/postgres?host={base}&port={port}"
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


#: The session server's pg_ctl command lines ("start", "stop"), once `postgres_url` has started it.
_SERVER: dict[str, list[str]] = {}


def start_server() -> None:
    """Start the session's server (again, after `stop_server`); returns once it accepts connections."""
    subprocess.run(_SERVER["start"], check=True, capture_output=True)


def stop_server() -> None:
    """Stop the session's server as an administrator would (`pg_ctl stop -m fast`: sessions are ended)."""
    subprocess.run(_SERVER["stop"], check=True, capture_output=True)


def new_database(url: str, name: str | None = None) -> str:
    """The URL of a new, empty database on the server of `url` (a fresh name unless `name` is given)."""
    from sqlalchemy import create_engine, make_url, text

    name = name or f"t_{secrets.token_hex(6)}"
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)
