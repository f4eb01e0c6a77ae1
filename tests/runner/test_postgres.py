"""The store through a PostgreSQL URL: same schema, migrations (v1 -> v2 included), sweep and reads as SQLite.

The server is tests/postgres_server.py's (one per session, on a Unix socket in a temporary directory);
each test works in a database of its own.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DataError

from dlperf.errors import StoreError
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.store.schema import MIGRATIONS, SCHEMA_VERSION
from dlperf.studies import load_study
from tests.conftest import STUDIES
from tests.postgres_server import new_database
from tests.v1_database import build_v1, check_migrated

pytestmark = pytest.mark.postgres


def test_sweep_into_postgres(postgres_url):
    url = new_database(postgres_url)
    store = Store(url)
    assert store.schema_version == SCHEMA_VERSION == 4
    study = load_study(str(STUDIES / "many_ok.yaml"))
    summary = run_study(study, store, frameworks=["numpy"], overrides={"budget_s": 0.05, "min_run_time_s": 0.01})
    rows = store.results(summary.run_id)
    assert len(rows) == 12 and all(r.status == "ok" for r in rows)
    assert all(len(r.measurement["sample_times_s"]) >= 6 for r in rows)
    assert store.run("latest").status == "complete"
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


#: A maxbatch run's variant: the target and its `-p` parameters (finding 5: longer than VARCHAR(16)).
LONG_VARIANT = "transformer model=gpt2-tiny seq_len=8"


def _run(store: Store, variant: str) -> str:
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    return store.create_run(study="maxbatch", variant=variant, study_hash="h", study_path="p", filters={},
                            settings={}, env_id=env_id, n_cases=0, dlperf_version="0")


def test_a_v3_postgres_store_upgrades_and_holds_a_long_variant(postgres_url):
    url = new_database(postgres_url)
    v3 = Store(url, migrations=MIGRATIONS[:3])
    old = _run(v3, "full")
    with pytest.raises(DataError):  # what version 3 did with a maxbatch run
        _run(v3, LONG_VARIANT)
    v3.engine.dispose()
    store = Store(url)
    assert store.schema_version == SCHEMA_VERSION == 4
    run_id = _run(store, LONG_VARIANT)
    assert store.run(run_id).variant == LONG_VARIANT and store.run(old).variant == "full"
    assert store.find_resumable(study="maxbatch", variant=LONG_VARIANT, study_hash="h", filters={},
                                env_id=None) == run_id
    with store.engine.connect() as conn:
        kind = conn.execute(text("SELECT data_type FROM information_schema.columns "
                                 "WHERE table_name = 'runs' AND column_name = 'variant'")).scalar()
    assert kind == "text"


def test_maxbatch_with_parameters_into_postgres_and_its_bundle_back(postgres_url, monkeypatch, tmp_path):
    """The finding's command, workers replaced: stored on PostgreSQL; exported from SQLite; imported into
    PostgreSQL."""
    from dlperf.runner import maxbatch
    from dlperf.store.bundle import export_bundle, import_bundle, read_bundle
    from tests.runner.test_maxbatch import _no_workers

    _no_workers(monkeypatch, lambda case: ("ok", None) if case.params["batch"] <= 2 else ("oom", "OOM"), [])
    target = maxbatch.resolve_target("transformer", {"model": "gpt2-tiny", "seq_len": 8})
    assert target.label == LONG_VARIANT
    pg = Store(new_database(postgres_url))
    out = maxbatch.search(pg, target, framework="numpy", device="cpu", steps=1, max_batch=8)
    assert out.largest == 2 and pg.run(out.run_id).variant == LONG_VARIANT
    lite = Store(tmp_path / "r.sqlite")
    out = maxbatch.search(lite, target, framework="numpy", device="cpu", steps=1, max_batch=8)
    export_bundle(lite, out.run_id, tmp_path / "run.dlperf")
    into = Store(new_database(postgres_url))
    import_bundle(into, read_bundle(tmp_path / "run.dlperf"), lease_stale_s=120.0)
    assert into.run(out.run_id).variant == LONG_VARIANT and len(into.results(out.run_id)) == len(out.probes)
