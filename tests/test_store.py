"""The store: migrations step by step, newer schemas refused, no duplicates, run lookup, export."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from dlperf.core.result import CaseResult
from dlperf.errors import StoreError, UnknownRunError
from dlperf.store import Store
from dlperf.store.export import to_csv, to_json
from dlperf.store.schema import MIGRATIONS, SCHEMA_VERSION


def make_run(store: Store, study="s") -> str:
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    return store.create_run(study=study, variant="full", study_hash="h", study_path="p", filters={}, settings={},
                            env_id=env_id, n_cases=2, dlperf_version="0")


def result_row(run_id: str, key="ops/numpy/cpu/n=1", rep=0, status="ok", samples=(1e-3, 1.1e-3)):
    now = datetime.now(UTC)
    return {"run_id": run_id, "case_key": key, "repetition": rep, "workload": "ops", "framework": "numpy",
            "device": "cpu", "params": {"op": "add", "n": 1}, "status": status, "reason": None,
            "measurement": {"sample_times_s": list(samples), "sample_iters": [1] * len(samples)},
            "metrics": {"median_s": 1.05e-3, "n_samples": len(samples)} if status == "ok" else None,
            "env_id": 1, "wall_s": 0.1,
            "started_at": now, "finished_at": now}


def test_fresh_database_is_migrated_to_current(db_path):
    store = Store(db_path)
    assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)


def test_newer_schema_is_refused_with_clear_message(db_path):
    store = Store(db_path)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE dlperf_meta SET value='99' WHERE key='schema_version'"))
    with pytest.raises(StoreError, match=r"schema version 99, newer than this dlperf reads \(1\)"):
        Store(db_path)


def test_migrations_run_one_step_at_a_time(db_path):
    Store(db_path)  # at version 1
    applied = []

    def v1_to_v2(conn):
        applied.append(2)
        conn.execute(text("ALTER TABLE results ADD COLUMN note TEXT"))

    def v2_to_v3(conn):
        applied.append(3)
        conn.execute(text("CREATE INDEX ix_results_status ON results(status)"))

    store = Store(db_path, migrations=[*MIGRATIONS, v1_to_v2, v2_to_v3])
    assert applied == [2, 3] and store.schema_version == 3
    Store(db_path, migrations=[*MIGRATIONS, v1_to_v2, v2_to_v3])  # already current: nothing re-applied
    assert applied == [2, 3]


def test_foreign_database_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(StoreError, match="not a dlperf database"):
        Store(path)


def test_results_never_duplicated(db_path):
    store = Store(db_path)
    run_id = make_run(store)
    assert store.add_result(result_row(run_id))
    assert not store.add_result(result_row(run_id))
    assert store.done_cases(run_id) == {("ops/numpy/cpu/n=1", 0)}


def test_environment_stored_once(db_path):
    store = Store(db_path)
    a = store.environment_id({"cpu_model": "x"}, "h1")
    assert store.environment_id({"cpu_model": "x"}, "h1") == a
    assert store.environment_id({"cpu_model": "y"}, "h2") != a
    assert store.environment(a) == {"cpu_model": "x"}


def test_resolve_run(db_path):
    store = Store(db_path)
    with pytest.raises(UnknownRunError, match="no runs"):
        store.resolve_run("latest")
    run_id = make_run(store, study="alpha")
    assert store.resolve_run("latest") == run_id
    assert store.resolve_run("alpha-") == run_id
    with pytest.raises(UnknownRunError, match="unknown run 'zzz'"):
        store.resolve_run("zzz")


def test_export_csv_and_json(db_path):
    store = Store(db_path)
    run_id = make_run(store)
    store.add_result(result_row(run_id))
    store.add_result(result_row(run_id, key="ops/numpy/cpu/n=2", status="oom"))
    results = store.results(run_id)
    results = [CaseResult.from_row(r) for r in results]
    rows = list(csv.DictReader(io.StringIO(to_csv(results))))
    assert [r["status"] for r in rows] == ["ok", "oom"]
    assert float(rows[0]["median_s"]) == pytest.approx(1.05e-3) and rows[1]["median_s"] == ""
    assert rows[0]["op"] == "add"
    data = json.loads(to_json(store.run(run_id), store.environment(1), results))
    assert data["results"][0]["measurement"]["sample_times_s"] == [1e-3, 1.1e-3]
    assert data["run"]["id"] == run_id


def test_retry_failed_deletes_only_failures(db_path):
    store = Store(db_path)
    run_id = make_run(store)
    store.add_result(result_row(run_id, key="a"))
    store.add_result(result_row(run_id, key="b", status="timeout"))
    assert store.delete_results(run_id, ["timeout", "error"]) == 1
    assert store.done_cases(run_id) == {("a", 0)}
