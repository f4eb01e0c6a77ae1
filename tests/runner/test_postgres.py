"""The store through a PostgreSQL URL: same schema, migrations (v1 -> v2 included), sweep and reads as SQLite.

The server is tests/postgres_server.py's (one per session, on a Unix socket in a temporary directory);
each test works in a database of its own.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from dlperf.errors import StoreError
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.store.schema import SCHEMA_VERSION
from dlperf.studies import load_study
from tests.conftest import STUDIES
from tests.postgres_server import new_database
from tests.v1_database import build_v1, check_migrated

pytestmark = pytest.mark.postgres


def test_sweep_into_postgres(postgres_url):
    url = new_database(postgres_url)
    store = Store(url)
    assert store.schema_version == SCHEMA_VERSION == 3
    study = load_study(str(STUDIES / "many_ok.yaml"))
    summary = run_study(study, store, frameworks=["numpy"], overrides={"budget_s": 0.05, "min_run_time_s": 0.01})
    rows = store.results(summary.run_id)
    assert len(rows) == 12 and all(r.status == "ok" for r in rows)
    assert all(len(r.measurement["sample_times_s"]) >= 6 for r in rows)
    assert store.run("latest")["status"] == "complete"
    assert store.resolve_run(summary.run_id[:12]) == summary.run_id
    # A second open finds the schema current and the data intact.
    assert len(Store(url).results(summary.run_id)) == 12


def test_newer_postgres_schema_refused(postgres_url):
    url = new_database(postgres_url)
    store = Store(url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE dlperf_meta SET value='42' WHERE key='schema_version'"))
    with pytest.raises(StoreError, match="schema version 42"):
        Store(url)


def test_v1_database_migrates_to_v2_on_postgres(postgres_url):
    url = new_database(postgres_url)
    check_migrated(url, build_v1(url), new_database(postgres_url))
