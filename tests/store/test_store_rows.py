"""The store's typed rows: `RunRow` holds every column of the `runs` table (read from SQLAlchemy's metadata), in
the table's order, so that `to_dict()` is the row as the store gave it before it was typed; a row of an old
(version 1) store parses; `list_runs` gives its counts and lease beside the row."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from dlperf.store import Store
from dlperf.store.export import to_json
from dlperf.store.rows import ListedRun, RunRow, run_columns
from dlperf.store.schema import runs
from tests.factories import run_row
from tests.v1_database import ENV_A, build_v1


def test_run_row_has_every_column_of_the_runs_table_in_its_order() -> None:
    assert run_columns() == tuple(c.name for c in runs.columns)


def test_a_nullable_column_is_optional_and_a_required_one_is_not() -> None:
    """A column the store may leave NULL defaults to None in RunRow; one it never leaves NULL has no default."""
    optional = {f.name for f in dataclasses.fields(RunRow) if f.default is None}
    assert optional == {c.name for c in runs.columns if c.nullable}


def test_a_run_of_a_version_1_store_parses(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'v1.sqlite'}"
    ids = build_v1(url)
    store = Store(url)
    row = store.run("run-a")
    assert isinstance(row, RunRow)
    assert (row.id, row.study, row.variant, row.status, row.n_cases) == ("run-a", "s", "full", "interrupted", 2)
    assert row.env_id == ids["a"] and row.finished_at is None and row.filters == {} and row.settings == {}
    assert row.derived is not None and row.derived["dlperf_git_commit"] == ENV_A["dlperf_git_commit"]
    env = store.run_environment("run-a")
    assert env["threads"] == ENV_A["threads"] and env["cpu_model"] == ENV_A["cpu_model"]


def test_to_dict_gives_the_row_as_the_store_gave_it(tmp_path) -> None:
    store = Store(tmp_path / "s.sqlite")
    env_id = store.environment_id({"cpu_model": "Test CPU", "threads": 2}, "h1")
    run_id = store.create_run(study="s", variant="quick", study_hash="abc", study_path="s.yaml",
                              filters={"frameworks": ["numpy"]}, settings={"threads": 2}, env_id=env_id, n_cases=3,
                              dlperf_version="0.1.0", derived={"dlperf_git_commit": None})
    with store.engine.connect() as conn:
        raw = dict(conn.execute(runs.select().where(runs.c.id == run_id)).mappings().one())
    row = store.run(run_id)
    assert row.to_dict() == raw and list(row.to_dict()) == list(raw)
    doc = json.loads(to_json(row, store.run_environment(run_id), []))
    assert list(doc["run"]) == [c.name for c in runs.columns] and doc["run"]["study_hash"] == "abc"
    assert doc["environment"] == {"cpu_model": "Test CPU", "threads": 2, "dlperf_git_commit": None}


def test_list_runs_gives_the_counts_and_the_lease_beside_the_row(tmp_path) -> None:
    store = Store(tmp_path / "s.sqlite")
    env_id = store.environment_id({"cpu_model": "Test CPU"}, "h1")
    run_id = store.create_run(study="s", variant="full", study_hash="abc", study_path="s.yaml", filters={},
                              settings={}, env_id=env_id, n_cases=2, dlperf_version="0.1.0")
    (listed,) = store.list_runs()
    assert isinstance(listed, ListedRun) and listed.id == run_id and listed.status == "running"
    assert (listed.n_done, listed.n_ok, listed.lease) == (None, None, None)  # no result stored, nobody executes it
    assert listed.to_dict() == store.run(run_id).to_dict()


def test_the_factory_builds_a_run_row() -> None:
    row = run_row("x", study="mlp", n_cases=4)
    assert isinstance(row, RunRow) and (row.id, row.study, row.n_cases) == ("x", "mlp", 4)
    assert row.started_at == datetime(2026, 1, 1, tzinfo=UTC)
