"""Bundles at the store level: the file's format, raw samples back bit-identical, environments matched by
fingerprint (a fleet run's several), idempotent imports, a newer bundle of a resumed run, and every refusal
(checksum, truncation, newer format, not a bundle, another run under the same id) writing nothing."""

from __future__ import annotations

import gzip
import json
import math
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from dlperf.core.result import CaseResult, case_key
from dlperf.store import Store, leases
from dlperf.store.bundle import (
    FORMAT_NAME,
    FORMAT_VERSION,
    RESULT_FIELDS,
    RUN_FIELDS,
    Bundle,
    BundleError,
    ImportOutcome,
    export_bundle,
    import_bundle,
    read_bundle,
)
from dlperf.store.schema import environments, results, run_leases, runs

T0 = datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=UTC)
#: Samples whose decimal forms are awkward: they must come back as the same 64 bits.
AWKWARD = [0.1 + 0.2, 1e-310, 5e-324, 1 / 3, 2.0**-40 * 3, 123456789.00000012, 1.0000000000000002e-3]
ENV_SUBMIT = ({"cpu_model": "submitter", "machine_label": "desk"}, "hash-submit")
ENV_WORKER = ({"cpu_model": "jetson", "machine_label": "bench"}, "hash-worker")
STALE_S = 120.0  # runner.lifecycle's default stale limit of a lease's heartbeat


def _result(store: Store, run_id: str, i: int, env_id: int, *, status: str = "ok",
            samples: list[float] | None = None, finished: datetime | None = None) -> CaseResult:
    samples = samples if samples is not None else [1e-3 * (i + 1), 1.1e-3 * (i + 1)]
    ok = status == "ok"
    params = {"op": "add", "n": i, "dtype": "float32"}
    r = CaseResult.model_validate({
        "run_id": run_id, "case_key": case_key("ops", "numpy", "cpu", params), "repetition": 0, "workload": "ops",
        "framework": "numpy", "device": "cpu", "params": params, "status": status,
        "reason": None if ok else "boom",
        "measurement": {"sample_times_s": samples, "sample_iters": [3] * len(samples)},
        "metrics": {"median_s": samples[0], "n_samples": len(samples), "fleet": {"host": "bench"}} if ok else None,
        "env_id": env_id, "wall_s": 0.25, "started_at": T0 + timedelta(seconds=i),
        "finished_at": finished or T0 + timedelta(seconds=i, milliseconds=500)})
    assert store.add_result(r)
    return r


def _source(tmp_path: Path, n: int = 3, status: str = "complete") -> tuple[Store, str, int, int]:
    """A store with one run: submitted from one environment, its results run in another (a fleet run) but the
    first, which ran on the submitter."""
    store = Store(tmp_path / "src.sqlite")
    env_a, env_b = store.environment_id(*ENV_SUBMIT), store.environment_id(*ENV_WORKER)
    run_id = store.create_run(study="s", variant="quick", study_hash="h1", study_path=str(tmp_path / "s.yaml"),
                              filters={"executor": "dask", "frameworks": []}, settings={"budget_s": 0.5},
                              env_id=env_a, n_cases=4, dlperf_version="0.1.0", derived={"peak": 1.5})
    for i in range(n):
        _result(store, run_id, i, env_a if i == 0 else env_b, samples=AWKWARD if i == 1 else None)
    store.set_run_status(run_id, status)
    return store, run_id, env_a, env_b


def _import(store: Store, source: Path | Bundle) -> ImportOutcome:
    """`source` (a bundle's file, or a bundle read) imported into `store`, leases judged with the default limit."""
    return import_bundle(store, source if isinstance(source, Bundle) else read_bundle(source), lease_stale_s=STALE_S)


def _raw(store: Store, run_id: str) -> list[dict]:
    """The results as stored, by case, with their environment's hash in place of the store's ids."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(results, environments.c.fingerprint_hash)
                            .select_from(results.join(environments, results.c.env_id == environments.c.id))
                            .where(results.c.run_id == run_id).order_by(results.c.id)).mappings().all()
    return [{k: v for k, v in r.items() if k not in ("id", "env_id")} for r in rows]


def _count(store: Store, table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _bits(xs: list[float]) -> list[bytes]:
    return [struct.pack("<d", x) for x in xs]


def _rewrite(path: Path, change) -> Path:
    """The bundle at `path` with `change(doc)` applied, written back gzip-compressed (its checksum untouched)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    change(doc)
    out = path.with_name("changed" + path.name)
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def test_the_bundle_fields_are_the_stores_columns():
    """A column added to runs or results must be decided on here (a bundle carries it, or says why not)."""
    assert set(RUN_FIELDS) == {c.name for c in runs.columns} - {"env_id"}
    assert set(RESULT_FIELDS) == {c.name for c in results.columns} - {"id", "run_id", "env_id"}


def test_round_trip_is_exact_and_the_file_is_versioned(tmp_path):
    (tmp_path / "s.yaml").write_text("name: s\nworkload: ops\n")
    src, run_id, *_ = _source(tmp_path)
    path = tmp_path / "b.dlperf.json.gz"
    def reader(row):  # the CLI's checks the file against the run's study hash (tests/cli/test_bundle_cli.py)
        return Path(row["study_path"]).read_text(), f"read from {row['study_path']}"
    written = export_bundle(src, run_id[:10], path, study_reader=reader)  # a prefix resolves
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert list(doc) == ["format", "format_version", "written_by", "written_at", "checksum", "content"]
    assert (doc["format"], doc["format_version"], doc["written_by"]) == (FORMAT_NAME, FORMAT_VERSION, "dlperf 0.1.0")
    assert datetime.fromisoformat(doc["written_at"]).tzinfo is not None
    assert doc["checksum"].startswith("sha256:") and len(doc["checksum"]) == 7 + 64
    content = doc["content"]
    assert list(content) == ["run", "environments", "results", "study"]
    assert content["run"]["started_at"].endswith("+00:00") and content["results"][0]["finished_at"].endswith("+00:00")
    assert list(content["results"][0]["params"]) == ["op", "n", "dtype"]  # the store's own order, not sorted
    assert content["study"]["yaml"] == "name: s\nworkload: ops\n" and "read from" in content["study"]["note"]
    assert [e["fingerprint_hash"] for e in content["environments"]] == ["hash-submit", "hash-worker"]
    assert not written.partial

    dst = Store(tmp_path / "dst.sqlite")
    outcome = _import(dst, path)
    assert (outcome.new, outcome.already, outcome.created_run, outcome.envs_new) == (3, 0, True, 2)
    assert outcome.line().startswith(f"run {run_id}: 3 new results (0 already stored)")
    assert outcome.line().endswith("; the study file's text is not stored (a store has no place for it: the bundle "
                                   "keeps it)")
    assert _raw(dst, run_id) == _raw(src, run_id)
    got = dst.results(run_id)[1].measurement["sample_times_s"]
    assert _bits(got) == _bits(AWKWARD)
    src_run, dst_run = src.run(run_id), dst.run(run_id)
    assert ({k: v for k, v in dst_run.to_dict().items() if k != "env_id"}
            == {k: v for k, v in src_run.to_dict().items() if k != "env_id"})
    assert dst.run_environment(run_id) == src.run_environment(run_id)
    assert [r.env_id for r in dst.results(run_id)] == [1, 2, 2]

    again = _import(dst, path)
    assert (again.new, again.already, again.replaced, again.created_run, again.envs_new) == (0, 3, 0, False, 0)
    assert again.line() == f"run {run_id}: 0 new results (3 already stored)"
    assert (_count(dst, runs), _count(dst, results), _count(dst, environments)) == (1, 3, 2)
    # the same run exported from the importing store is the same content; without a reader, no study text
    back = export_bundle(dst, run_id, tmp_path / "back.dlperf.json.gz").content
    assert {**back, "study": None} == {**written.content, "study": None}
    assert back["study"]["yaml"] is None and "not read at export" in back["study"]["note"]


def test_environments_already_stored_are_reused(tmp_path):
    src, run_id, *_ = _source(tmp_path)
    export_bundle(src, run_id, tmp_path / "b.gz")
    dst = Store(tmp_path / "dst.sqlite")
    dst.environment_id({"other": 1}, "hash-other")
    worker = dst.environment_id(*ENV_WORKER)
    outcome = _import(dst, tmp_path / "b.gz")
    assert (outcome.envs_new, outcome.envs_reused) == (1, 1) and _count(dst, environments) == 3
    assert [r.env_id for r in dst.results(run_id)][1:] == [worker, worker]


def test_a_newer_bundle_of_a_resumed_run_adds_only_what_is_missing(tmp_path):
    src, run_id, env_a, env_b = _source(tmp_path, n=2, status="running")
    export_bundle(src, run_id, tmp_path / "first.gz")
    assert read_bundle(tmp_path / "first.gz").partial
    dst = Store(tmp_path / "dst.sqlite")
    assert _import(dst, tmp_path / "first.gz").status_after == "running"
    _result(src, run_id, 2, env_b)
    _result(src, run_id, 3, env_b)
    src.set_run_status(run_id, "complete")
    export_bundle(src, run_id, tmp_path / "second.gz")
    outcome = _import(dst, tmp_path / "second.gz")
    assert (outcome.new, outcome.already, outcome.status_before, outcome.status_after) == (2, 2, "running", "complete")
    assert outcome.line() == f"run {run_id}: 2 new results (2 already stored); status running -> complete"
    assert _raw(dst, run_id) == _raw(src, run_id) and dst.run(run_id).finished_at == src.run(run_id).finished_at
    stale = _import(dst, tmp_path / "first.gz")  # the older bundle again: nothing goes back
    assert (stale.new, stale.already, stale.status_after) == (0, 2, "complete")
    assert dst.run(run_id).status == "complete" and _count(dst, results) == 4


def test_a_later_rerun_of_a_stored_case_replaces_it(tmp_path):
    src, run_id, env_a, env_b = _source(tmp_path, n=1)
    export_bundle(src, run_id, tmp_path / "first.gz")
    src.delete_results(run_id, ["ok"])  # as --retry-failed forgets a failure before running it again
    _result(src, run_id, 0, env_a, samples=[7e-3, 8e-3], finished=T0 + timedelta(hours=1))
    export_bundle(src, run_id, tmp_path / "second.gz")
    dst = Store(tmp_path / "dst.sqlite")
    _import(dst, tmp_path / "first.gz")
    outcome = _import(dst, tmp_path / "second.gz")
    assert (outcome.new, outcome.replaced, outcome.already) == (0, 1, 0)
    assert dst.results(run_id)[0].measurement["sample_times_s"] == [7e-3, 8e-3]
    assert _import(dst, tmp_path / "first.gz").already == 1  # the older one does not win back
    assert dst.results(run_id)[0].measurement["sample_times_s"] == [7e-3, 8e-3]


@pytest.fixture
def bundle_file(tmp_path) -> Path:
    src, run_id, *_ = _source(tmp_path)
    path = tmp_path / "b.dlperf.json.gz"
    export_bundle(src, run_id, path)
    return path


def _refused(dst: Store, path: Path, *fragments: str) -> None:
    with pytest.raises(BundleError) as err:
        _import(dst, path)
    line = str(err.value)
    assert "\n" not in line and "nothing was imported" in line
    for f in fragments:
        assert f in line, line
    assert (_count(dst, runs), _count(dst, results), _count(dst, environments)) == (0, 0, 0)


def test_an_edited_bundle_fails_its_checksum_and_a_reformatted_one_does_not(bundle_file, tmp_path):
    dst = Store(tmp_path / "dst.sqlite")

    def edit(doc):
        doc["content"]["results"][1]["measurement"]["sample_times_s"][0] = 0.3
    _refused(dst, _rewrite(bundle_file, edit), "checksum does not match")
    pretty = tmp_path / "pretty.json"  # uncompressed and re-indented (as `zcat | jq .` leaves it): same content
    pretty.write_text(json.dumps(json.loads(gzip.decompress(bundle_file.read_bytes())), indent=4))
    assert _import(dst, pretty).new == 3


def test_a_truncated_bundle_is_refused(bundle_file, tmp_path):
    data = bundle_file.read_bytes()
    cut = tmp_path / "cut.gz"
    for size in (len(data) // 2, len(data) - 5):
        cut.write_bytes(data[:size])
        _refused(Store(tmp_path / "dst.sqlite"), cut, "truncated")


def test_a_newer_format_is_refused_naming_both_versions(bundle_file, tmp_path):
    newer = _rewrite(bundle_file, lambda doc: doc.update(format_version=FORMAT_VERSION + 1))
    _refused(Store(tmp_path / "dst.sqlite"), newer,
             f"bundle format {FORMAT_VERSION + 1} is newer than this dlperf reads ({FORMAT_VERSION}): upgrade dlperf")


@pytest.mark.parametrize("text", ["hello", '{"run": {}, "environment": {}, "results": []}', "[1, 2]"])
def test_what_is_not_a_bundle_is_refused(tmp_path, text):
    path = tmp_path / "x.json"
    path.write_text(text)
    _refused(Store(tmp_path / "dst.sqlite"), path, "is not a dlperf bundle")


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(BundleError, match=r"nope\.gz: no such file$"):
        read_bundle(tmp_path / "nope.gz")


def test_a_malformed_content_with_a_good_checksum_is_refused(bundle_file, tmp_path):
    from dlperf.store.bundle import checksum

    def break_status(doc):
        doc["content"]["results"][0]["status"] = "fine"
        doc["checksum"] = checksum(doc["content"])
    _refused(Store(tmp_path / "dst.sqlite"), _rewrite(bundle_file, break_status), "malformed")


@pytest.mark.parametrize("clash", ["study hash", "environment"])
def test_another_run_under_the_same_id_is_refused_and_nothing_is_written(bundle_file, tmp_path, clash):
    bundle = read_bundle(bundle_file)
    dst = Store(tmp_path / "dst.sqlite")
    env = dst.environment_id({"x": 1}, "hash-x") if clash == "environment" else dst.environment_id(*ENV_SUBMIT)
    row = {k: bundle.run[k] for k in RUN_FIELDS if k not in ("started_at", "finished_at")}
    row.update(study_hash="other" if clash == "study hash" else bundle.run["study_hash"], env_id=env, started_at=T0)
    with dst.engine.begin() as conn:
        conn.execute(runs.insert().values(**row))
    before = (_count(dst, runs), _count(dst, results), _count(dst, environments))
    why = "another study hash" if clash == "study hash" else "another environment"
    with pytest.raises(BundleError, match=f"already in this store .*{why}"):
        _import(dst, bundle)
    assert (_count(dst, runs), _count(dst, results), _count(dst, environments)) == before  # the worker's env too


def test_floats_that_json_spells_specially_come_back(tmp_path):
    """NaN, infinities and -0.0 in metrics (a store may hold them) survive the file and its checksum."""
    src, run_id, env_a, _ = _source(tmp_path, n=0)
    r = CaseResult.model_validate({
        "run_id": run_id, "case_key": case_key("ops", "numpy", "cpu", {}), "repetition": 0, "workload": "ops",
        "framework": "numpy", "device": "cpu", "params": {}, "status": "ok",
        "measurement": {"sample_times_s": [-0.0, 1.5], "sample_iters": [1, 1]},
        "metrics": {"odd": [math.nan, math.inf, -math.inf]}, "env_id": env_a, "started_at": T0, "finished_at": T0})
    src.add_result(r)
    export_bundle(src, run_id, tmp_path / "b.gz")
    dst = Store(tmp_path / "dst.sqlite")
    _import(dst, tmp_path / "b.gz")
    got = _raw(dst, run_id)[0]
    assert _bits(got["measurement"]["sample_times_s"]) == _bits([-0.0, 1.5])
    odd = got["metrics"]["odd"]
    assert math.isnan(odd[0]) and odd[1:] == [math.inf, -math.inf]


def test_a_run_being_executed_is_left_to_its_executor_until_its_lease_is_gone(tmp_path):
    """A stale bundle of a run that another process is resuming writes nothing (its status and the cases that
    process is about to store are its own) while the lease is live; once the owner is gone, it imports."""
    src, run_id, env_a, env_b = _source(tmp_path, n=1, status="running")
    export_bundle(src, run_id, tmp_path / "partial.gz")
    case_1 = _result(src, run_id, 1, env_b)
    src.set_run_status(run_id, "interrupted")
    export_bundle(src, run_id, tmp_path / "more.gz")
    dst = Store(tmp_path / "dst.sqlite")
    _import(dst, tmp_path / "partial.gz")
    token = leases.new_token()  # the run is resumed on the bench machine, against this store
    assert leases.acquire(dst.engine, run_id, leases.Owner("bench", 4242, 1.0), token) is None
    with pytest.raises(BundleError) as err:
        _import(dst, tmp_path / "more.gz")
    line = str(err.value)
    assert line.startswith(f"run {run_id} is being executed by pid 4242 on bench since ") and "\n" not in line
    assert line.endswith("; import after it ends; nothing was imported")
    assert dst.run(run_id).status == "running" and _count(dst, results) == 1
    assert dst.add_result(case_1.model_copy(update={"env_id": dst.run(run_id).env_id}), lease_token=token)
    with dst.engine.begin() as conn:  # the owner stopped beating long ago: gone
        conn.execute(run_leases.update().values(heartbeat_at=T0))
    outcome = _import(dst, tmp_path / "more.gz")
    assert (outcome.new, outcome.already) == (0, 2)


def test_a_later_end_of_the_run_is_followed_even_without_a_new_result(tmp_path):
    """Interrupted after its last result was stored, then resumed to complete with nothing left to run: the
    newer bundle brings no result, but the run's later end (and only a later one)."""
    src, run_id, *_ = _source(tmp_path, n=4, status="interrupted")
    export_bundle(src, run_id, tmp_path / "interrupted.gz")
    src.set_run_status(run_id, "complete")
    export_bundle(src, run_id, tmp_path / "complete.gz")
    dst = Store(tmp_path / "dst.sqlite")
    _import(dst, tmp_path / "interrupted.gz")
    outcome = _import(dst, tmp_path / "complete.gz")
    assert outcome.line() == f"run {run_id}: 0 new results (4 already stored); status interrupted -> complete"
    assert dst.run(run_id).status == "complete" and dst.run(run_id).finished_at == src.run(run_id).finished_at
    assert _import(dst, tmp_path / "interrupted.gz").status_after == "complete"  # an earlier end does not win back


def _crafted(path: Path, change) -> Path:
    """The bundle at `path` with `change(content)` applied and its checksum made to match again: content that
    no dlperf wrote, which only its shape can refuse."""
    from dlperf.store.bundle import checksum

    def edit(doc):
        change(doc["content"])
        doc["checksum"] = checksum(doc["content"])
    return _rewrite(path, edit)


@pytest.mark.parametrize(("change", "fragment"), [
    (lambda c: c["results"][0].update(measurement={"x": 1}), "measurement"),
    (lambda c: c["results"][0].update(measurement={"sample_times_s": [1.0], "sample_iters": [0]}), "measurement"),
    (lambda c: c["results"][0].update(metrics=[1, 2]), "metrics"),
    (lambda c: c["results"][0].update(metrics={"p50_s": "fast"}), "cannot be read back"),
    (lambda c: c["results"][0].update(params=None), "params"),
    (lambda c: c["results"][0].update(repetition="0"), "repetition"),
    (lambda c: c["results"][0].update(started_at=None), "started_at"),
    (lambda c: c["run"].update(started_at=None), "the run's started_at"),
    (lambda c: c["run"].update(started_at="yesterday"), "the run's started_at is not an ISO 8601 time"),
    (lambda c: c["run"].update(n_cases="many"), "the run's n_cases"),
    (lambda c: c["run"].update(n_cases=-1), "the run's n_cases"),
    (lambda c: c["run"].update(filters=None), "the run's filters"),
    (lambda c: c["run"].update(settings=[]), "the run's settings"),
    (lambda c: c["run"].update(status="done"), "the run's status"),
    (lambda c: c["run"].update(id="x" * 129), "the run's id"),
    (lambda c: c["run"].pop("derived"), "the run's derived"),
    (lambda c: c["environments"][0].update(data={}), "environment"),
    (lambda c: c.update(results={}), "results"),
])
def test_content_that_would_poison_the_store_is_refused_in_one_line(bundle_file, tmp_path, change, fragment):
    """A checksum says only that the writer's content is unchanged: what an import writes must be what the
    store's readers can read (`show` recomputes statistics from the raw samples)."""
    _refused(Store(tmp_path / "dst.sqlite"), _crafted(bundle_file, change), "malformed", fragment)


def test_a_store_that_refuses_a_row_is_one_line(bundle_file, tmp_path, monkeypatch):
    """What the shape lets through but the database refuses (a constraint of a store of another version)
    is one line, not a traceback."""
    from sqlalchemy.exc import IntegrityError

    from dlperf.store.bundle import importer

    def refuse(*args, **kwargs):
        raise IntegrityError("INSERT INTO results ...", {}, Exception("CHECK constraint failed: x\nDETAIL: more"))
    monkeypatch.setattr(importer, "_import", refuse)
    _refused(Store(tmp_path / "dst.sqlite"), bundle_file, "the store refused", "CHECK constraint failed: x")


def _with_odd_floats(tmp_path: Path, **changes) -> tuple[Store, str]:
    """A SQLite store whose one result has NaN and infinities in its metrics (a meter's NaN mean power), as
    SQLite holds them; `changes` replace the result's fields."""
    src, run_id, env_a, _ = _source(tmp_path, n=0)
    row = {"run_id": run_id, "repetition": 0, "workload": "ops", "framework": "numpy",
           "device": "cpu", "params": {}, "status": "ok",
           "measurement": {"sample_times_s": [-0.0, 1.5], "sample_iters": [1, 1]},
           "metrics": {"energy": {"mean_power_w": math.nan, "joules": 2.0}, "odd": [1.0, math.inf, -math.inf]},
           "env_id": env_a, "started_at": T0, "finished_at": T0}
    row |= changes
    src.add_result(CaseResult.model_validate({**row, "case_key": case_key("ops", "numpy", "cpu", row["params"])}))
    return src, run_id


def test_a_non_finite_raw_sample_is_refused(tmp_path, bundle_file):
    """Raw samples are never altered: a NaN sample (no timer gives one) is neither exported nor imported,
    whatever the store."""
    src, run_id = _with_odd_floats(tmp_path, measurement={"sample_times_s": [1e-3, math.nan], "sample_iters": [1, 1]})
    with pytest.raises(BundleError, match=r"b\.gz \(not written: run .*'s measurement holds NaN at sample_times_s"
                                          r"\[1\]: not a raw sample\)$"):
        export_bundle(src, run_id, tmp_path / "b.gz")
    assert not (tmp_path / "b.gz").exists()

    def poison(c):
        c["results"][1]["measurement"]["sample_times_s"][2] = math.inf
    _refused(Store(tmp_path / "dst.sqlite"), _crafted(bundle_file, poison), "malformed",
             "result 'ops/numpy/cpu/dtype=float32,n=1,op=add' repetition 0's measurement holds Infinity at "
             "sample_times_s[2]")


@pytest.mark.postgres
def test_non_finite_metrics_into_postgresql_are_null_and_said_so(tmp_path, postgres_url):
    """SQLite (a Jetson's store) holds NaN; PostgreSQL's JSON cannot: the metric is stored as null, its value
    and why kept beside it in the metrics, the import line says so; the raw samples come back bit-identical.
    A non-finite value elsewhere than in the metrics (a parameter) is refused in one line."""
    from tests.postgres_server import new_database

    src, run_id = _with_odd_floats(tmp_path)
    export_bundle(src, run_id, tmp_path / "b.gz")
    pg = Store(new_database(postgres_url))
    outcome = _import(pg, tmp_path / "b.gz")
    assert outcome.new == 1 and "1 result's non-finite metrics stored as null (PostgreSQL" in outcome.line()
    got = _raw(pg, run_id)[0]
    assert _bits(got["measurement"]["sample_times_s"]) == _bits([-0.0, 1.5])
    metrics = got["metrics"]
    assert metrics["energy"] == {"mean_power_w": None, "joules": 2.0} and metrics["odd"] == [1.0, None, None]
    assert metrics["nonfinite"]["values"] == {"energy.mean_power_w": "NaN", "odd[1]": "Infinity",
                                              "odd[2]": "-Infinity"}
    assert "PostgreSQL" in metrics["nonfinite"]["reason"]
    assert pg.results(run_id)[0].metrics is not None  # the store's reader reads it
    assert (_import(pg, tmp_path / "b.gz").already, _count(pg, results)) == (1, 1)

    other = tmp_path / "other"
    other.mkdir()
    src2, run_2 = _with_odd_floats(other, params={"lr": math.inf})
    export_bundle(src2, run_2, other / "b.gz")
    with pytest.raises(BundleError) as err:
        _import(pg, other / "b.gz")
    assert str(err.value) == (f"run {run_2}: result 'ops/numpy/cpu/lr=inf' repetition 0's params.lr is Infinity, "
                              f"which PostgreSQL's JSON cannot hold; nothing was imported")
    assert (_count(pg, runs), _count(pg, results)) == (1, 1)


def test_a_bundle_is_never_written_over_the_store_it_is_read_from(tmp_path):
    """`-o` naming the store's own SQLite file (or a link to it, or its journal) would replace the store."""
    src, run_id, *_ = _source(tmp_path)
    (tmp_path / "link.sqlite").symlink_to(tmp_path / "src.sqlite")
    for target in (tmp_path / "src.sqlite", tmp_path / "link.sqlite", tmp_path / "src.sqlite-wal"):
        with pytest.raises(BundleError, match="is this store's own database file"):
            export_bundle(src, run_id, target)
    assert len(src.results(run_id)) == 3 and len(Store(tmp_path / "link.sqlite").results(run_id)) == 3
