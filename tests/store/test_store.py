"""The store: migrations step by step (v1 -> v2 re-keys environments by identity), newer schemas refused,
no duplicates, run lookup, each run's environment with its own derived data, export."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from dlperf.core.result import CaseResult
from dlperf.errors import StoreError, UnknownRunError
from dlperf.hardware.identity import derived, identity_hash
from dlperf.store import Store
from dlperf.store.export import to_csv, to_json
from dlperf.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.v1_database import ENV_A, ENV_B, build_v1, check_migrated


def make_run(store: Store, study="s") -> str:
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    return store.create_run(study=study, variant="full", study_hash="h", study_path="p", filters={}, settings={},
                            env_id=env_id, n_cases=2, dlperf_version="0")


def result_row(run_id: str, key="ops/numpy/cpu/n=1", rep=0, status="ok", samples=(1e-3, 1.1e-3)) -> CaseResult:
    now = datetime.now(UTC)
    return CaseResult.from_row({
            "run_id": run_id, "case_key": key, "repetition": rep, "workload": "ops", "framework": "numpy",
            "device": "cpu", "params": {"op": "add", "n": 1}, "status": status, "reason": None,
            "measurement": {"sample_times_s": list(samples), "sample_iters": [1] * len(samples)},
            "metrics": {"median_s": 1.05e-3, "n_samples": len(samples)} if status == "ok" else None,
            "env_id": 1, "wall_s": 0.1,
            "started_at": now, "finished_at": now})


def test_fresh_database_is_migrated_to_current(db_path):
    store = Store(db_path)
    assert store.schema_version == SCHEMA_VERSION == len(MIGRATIONS)


def test_newer_schema_is_refused_with_clear_message(db_path):
    store = Store(db_path)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE dlperf_meta SET value='99' WHERE key='schema_version'"))
    with pytest.raises(StoreError, match=r"schema version 99, newer than this dlperf reads \(4\)"):
        Store(db_path)


def test_migrations_run_one_step_at_a_time(db_path):
    Store(db_path)  # at the current version
    applied = []
    nxt = SCHEMA_VERSION + 1

    def step_a(conn):
        applied.append(nxt)
        conn.execute(text("ALTER TABLE results ADD COLUMN note TEXT"))

    def step_b(conn):
        applied.append(nxt + 1)
        conn.execute(text("CREATE INDEX ix_results_status ON results(status)"))

    store = Store(db_path, migrations=[*MIGRATIONS, step_a, step_b])
    assert applied == [nxt, nxt + 1] and store.schema_version == nxt + 1
    Store(db_path, migrations=[*MIGRATIONS, step_a, step_b])  # already current: nothing re-applied
    assert applied == [nxt, nxt + 1]


def test_v1_database_migrates_to_v2(tmp_path):
    """Environments that differ only in derived data (peaks, commit) merge; runs keep their own peaks."""
    url = f"sqlite:///{tmp_path / 'v1.sqlite'}"
    check_migrated(url, build_v1(url), f"sqlite:///{tmp_path / 'fresh.sqlite'}")


def test_a_run_reports_the_derived_data_it_was_created_with(db_path):
    store = Store(db_path)
    runs = []
    for fp in (ENV_A, ENV_B):  # one machine, measured under two DLPERF_* overrides and commits: one environment
        env_id = store.environment_id(fp, identity_hash(fp))
        runs.append(store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={},
                                     settings={}, env_id=env_id, n_cases=1, dlperf_version="0", derived=derived(fp)))
    assert store.run(runs[0]).env_id == store.run(runs[1]).env_id
    assert store.run_environment(runs[0]) == ENV_A and store.run_environment(runs[1]) == ENV_B
    assert store.run_environment(make_run(store)) == {"cpu_model": "x"}  # no derived data: the environment's
    with pytest.raises(UnknownRunError, match="unknown run 'nope'"):
        store.run_environment("nope")


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
    assert store.has_result(run_id, "ops/numpy/cpu/n=1", 0)
    assert not store.has_result(run_id, "ops/numpy/cpu/n=1", 1) and not store.has_result(run_id, "other", 0)
    assert not store.has_result("no-such-run", "ops/numpy/cpu/n=1", 0)


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


@pytest.mark.parametrize("ref", ["A" * 100_000, "../" * 20_000, "\u00e9" * 30_000, "%" * 30_000])
def test_a_run_reference_longer_than_any_id_is_unknown(db_path, ref):
    """Found by the fuzz harness: SQLite refused the prefix lookup's LIKE pattern ('too complex', exit 70 with the
    SQL); a reference past the longest id is unknown before the database sees it, said in one short line."""
    store = Store(db_path)
    make_run(store, study="alpha")
    with pytest.raises(UnknownRunError, match=r"unknown run .*\.\.\. \([\d,]+ characters; a run id has at most") as exc:
        store.resolve_run(ref)
    assert len(str(exc.value)) < 300


def test_export_csv_and_json(db_path):
    store = Store(db_path)
    run_id = make_run(store)
    store.add_result(result_row(run_id))
    store.add_result(result_row(run_id, key="ops/numpy/cpu/n=2", status="oom"))
    results = store.results(run_id)
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


def test_a_run_id_drawn_twice_in_one_second_is_drawn_again(tmp_path, monkeypatch):
    """Run ids are study-second-4 hex digits: a synthetic store that makes many runs in one second can draw an id
    twice; the second run gets another id instead of failing on the unique key."""
    from dlperf.store import db as store_db

    store = Store(str(tmp_path / "s.db"))
    env = store.environment_id({"cpu_model": "x"}, "h1")
    draws = iter(["abcd", "abcd", "abcd", "ef01"])
    monkeypatch.setattr(store_db.secrets, "token_hex", lambda n: next(draws))
    fixed = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
    monkeypatch.setattr(store_db, "now", lambda: fixed)  # both runs start in the same second
    kwargs = dict(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={}, env_id=env,
                  n_cases=1, dlperf_version="0")
    first, second = store.create_run(**kwargs), store.create_run(**kwargs)
    assert first == "s-20261123-120000-abcd" and second == "s-20261123-120000-ef01"
    assert {r.id for r in store.runs_of_study("s")} == {first, second}


@pytest.mark.postgres
def test_a_live_result_with_a_nan_metric_is_stored_in_postgresql_as_null_and_said_so(postgres_url):
    """A worker's metrics may hold NaN (a meter's mean power over a 0 s window): PostgreSQL's JSON refused the
    whole row; now the value is null, kept beside it as JSON spells it, with the reason (as a bundle import does)."""
    import math

    from tests.postgres_server import new_database

    store = Store(new_database(postgres_url))
    run_id = make_run(store)
    row = result_row(run_id)
    row = row.model_copy(update={"metrics": row.metrics.model_copy(update={"energy": {"mean_power_w": math.nan}})})
    assert store.add_result(row)
    metrics = store.results(run_id)[0].metrics.as_dict()
    assert metrics["energy"] == {"mean_power_w": None}
    assert metrics["nonfinite"]["values"] == {"energy.mean_power_w": "NaN"}
    assert "PostgreSQL" in metrics["nonfinite"]["reason"]
    assert metrics["median_s"] == pytest.approx(1.05e-3)  # the finite figures as they were


def test_sqlite_keeps_a_nan_metric(db_path):
    import math

    store = Store(db_path)
    run_id = make_run(store)
    row = result_row(run_id)
    row = row.model_copy(update={"metrics": row.metrics.model_copy(update={"energy": {"mean_power_w": math.nan}})})
    assert store.add_result(row)
    metrics = store.results(run_id)[0].metrics.as_dict()
    assert math.isnan(metrics["energy"]["mean_power_w"]) and "nonfinite" not in metrics
