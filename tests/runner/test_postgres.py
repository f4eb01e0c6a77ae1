"""The store through a PostgreSQL URL: same schema, migrations (v1 -> v2 included), sweep and reads as SQLite.

A throwaway PostgreSQL cluster is started on a Unix socket in a temporary
directory (no TCP). Runs wherever PostgreSQL's server binaries are installed
(they are on the CI image); skipped with the reason elsewhere.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile

import pytest
from sqlalchemy import create_engine, text

from dlperf.errors import StoreError
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.store.schema import SCHEMA_VERSION
from dlperf.studies import load_study
from tests.conftest import STUDIES
from tests.v1_database import build_v1, check_migrated

pytestmark = pytest.mark.postgres


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    pytest.importorskip("psycopg", reason="psycopg not installed: pip install -e '.[postgres]'")
    base = tempfile.mkdtemp(prefix="dlperf-pg-", dir="/tmp")
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: use the postgres system user
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(base, "data"), "54329"
    subprocess.run([*run_as, initdb, "-D", data, "-A", "trust", "-U", "dlperf"], check=True, capture_output=True)
    subprocess.run([*run_as, pg_ctl, "-D", data, "-w", "-l", os.path.join(base, "log"), "-o",
                    f"-k {base} -c listen_addresses='' -p {port}", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://dlperf@/postgres?host={base}&port={port}"
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_sweep_into_postgres(postgres_url):
    store = Store(postgres_url)
    assert store.schema_version == SCHEMA_VERSION == 2
    study = load_study(str(STUDIES / "many_ok.yaml"))
    summary = run_study(study, store, frameworks=["numpy"], overrides={"budget_s": 0.05, "min_run_time_s": 0.01})
    rows = store.results(summary.run_id)
    assert len(rows) == 12 and all(r.status == "ok" for r in rows)
    assert all(len(r.measurement["sample_times_s"]) >= 6 for r in rows)
    assert store.run("latest")["status"] == "complete"
    assert store.resolve_run(summary.run_id[:12]) == summary.run_id
    # A second open finds the schema current and the data intact.
    assert len(Store(postgres_url).results(summary.run_id)) == 12


def test_newer_postgres_schema_refused(postgres_url):
    store = Store(postgres_url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE dlperf_meta SET value='42' WHERE key='schema_version'"))
    try:
        with pytest.raises(StoreError, match="schema version 42"):
            Store(postgres_url)
    finally:
        with store.engine.begin() as conn:
            conn.execute(text(f"UPDATE dlperf_meta SET value='{SCHEMA_VERSION}' WHERE key='schema_version'"))


def _new_database(url: str, name: str) -> str:
    """The URL of a new, empty database `name` on the same server."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return url.replace("/postgres?", f"/{name}?")


def test_v1_database_migrates_to_v2_on_postgres(postgres_url):
    url = _new_database(postgres_url, "dlperf_v1")
    check_migrated(url, build_v1(url), _new_database(postgres_url, "dlperf_fresh"))
