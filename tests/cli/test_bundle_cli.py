"""`dlperf bundle export` / `import` as a user meets them, on a real run (tests/studies/many_ok.yaml, stored by
`dlperf run`): the round trip into an empty store shows the same table and report, a second import adds
nothing, a partial bundle of a running run then the whole one add only what is missing, PostgreSQL both ways,
and each bad input is one line that writes nothing."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from dlperf.store.bundle import checksum
from tests.cli.conftest import STUDIES, assert_one_line_error
from tests.postgres_server import new_database


def _first_run(db: Path) -> tuple[str, int]:
    """The older of the two runs of `two_runs`, and its case count."""
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        run_id, n = conn.execute(text("SELECT id, n_cases FROM runs ORDER BY started_at LIMIT 1")).one()
    engine.dispose()
    return str(run_id), int(n)


def _ok(res, *fragments: str) -> str:
    assert res.returncode == 0 and res.stderr == "", res.stderr
    for f in fragments:
        assert f in res.stdout, res.stdout
    return res.stdout


def test_round_trip_shows_the_same_table_and_report(dlperf_main, two_runs, tmp_path):
    source, _, _ = two_runs
    run_id, n = _first_run(source)
    bundle, target = tmp_path / "run.dlperf.json.gz", tmp_path / "imported.sqlite"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(bundle), db=source),
        f"wrote {bundle}", f"run {run_id}, {n} of {n} cases, 1 environment(s), study file included")
    first = _ok(dlperf_main("bundle", "import", str(bundle), "--db", str(target)))
    assert first.startswith(f"run {run_id}: {n} new results (0 already stored); a new run (complete)"), first
    again = _ok(dlperf_main("bundle", "import", str(bundle), "--db", str(target)))
    assert again == f"run {run_id}: 0 new results ({n} already stored)\n"
    for command in (("show", run_id), ("report", run_id)):
        here = _ok(dlperf_main(*command, "--db", str(source)), run_id)
        there = _ok(dlperf_main(*command, "--db", str(target)), run_id)
        assert there == here, command


def test_a_partial_bundle_then_the_whole_run(dlperf_main, two_runs, tmp_path):
    """A run still being executed is exported as it is (the command says so); the bundle of the ended run
    adds only the missing results and the run's status."""
    source, _, _ = two_runs
    run_id, n = _first_run(source)
    running = tmp_path / "running.sqlite"
    shutil.copy(source, running)
    engine = create_engine(f"sqlite:///{running}")
    with engine.begin() as conn:  # as it was mid-sweep: 5 cases stored, still running
        conn.execute(text("DELETE FROM results WHERE run_id = :r AND id NOT IN (SELECT id FROM results "
                          "WHERE run_id = :r ORDER BY id LIMIT 5)"), {"r": run_id})
        conn.execute(text("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = :r"), {"r": run_id})
    engine.dispose()
    partial, whole, target = tmp_path / "partial.gz", tmp_path / "whole.gz", tmp_path / "t.sqlite"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(partial), db=running),
        f"5 of {n} cases", f"partial: run {run_id} was running when exported")
    _ok(dlperf_main("bundle", "import", str(partial), "--db", str(target)),
        f"run {run_id}: 5 new results (0 already stored); a new run (running)",
        f"partial: the bundle holds 5 of {n} cases")
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(whole), db=source))
    _ok(dlperf_main("bundle", "import", str(whole), "--db", str(target)),
        f"run {run_id}: {n - 5} new results (5 already stored); status running -> complete")
    assert _ok(dlperf_main("show", run_id, "--db", str(target))) == _ok(dlperf_main("show", run_id, "--db",
                                                                                       str(source)))


@pytest.mark.postgres
def test_round_trip_through_postgresql(dlperf_main, two_runs, tmp_path, postgres_url):
    """SQLite -> PostgreSQL -> SQLite: the same table on all three, the same content in both bundles."""
    source, _, _ = two_runs
    run_id, n = _first_run(source)
    url = new_database(postgres_url)
    out, back, target = tmp_path / "out.gz", tmp_path / "back.gz", tmp_path / "t.sqlite"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(out), db=source))
    _ok(dlperf_main("bundle", "import", str(out), "--db", url), f"run {run_id}: {n} new results")
    _ok(dlperf_main("bundle", "import", str(out), "--db", url), f"run {run_id}: 0 new results ({n} already stored)")
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(back), "--db", url))
    _ok(dlperf_main("bundle", "import", str(back), "--db", str(target)), f"run {run_id}: {n} new results")
    tables = {_ok(dlperf_main("show", run_id, "--db", db)) for db in (str(source), url, str(target))}
    assert len(tables) == 1
    contents = [json.loads(gzip.decompress(p.read_bytes()))["content"] for p in (out, back)]
    assert contents[0] == contents[1]  # raw samples, metrics, times, environment: all as they were


def test_the_study_text_travels_only_while_its_file_is_what_the_run_ran(dlperf_main, two_runs, tmp_path):
    """Export reads the file at the run's study path and carries its text only where it still gives the run's
    study hash; an import says that the store keeps no study text (the bundle does)."""
    source, _, _ = two_runs
    run_id, _ = _first_run(source)
    study, db = tmp_path / "study.yaml", tmp_path / "moved.sqlite"
    original = (STUDIES / "many_ok.yaml").read_text()
    study.write_text(original)
    shutil.copy(source, db)
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:  # the run as if its study had been this copy
        conn.execute(text("UPDATE runs SET study_path = :p WHERE id = :r"), {"p": str(study), "r": run_id})
    engine.dispose()
    same, changed = tmp_path / "same.gz", tmp_path / "changed.gz"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(same), db=db), "study file included")
    assert _content(same)["study"]["yaml"] == original
    study.write_text(original.replace("timeout_s: 60", "timeout_s: 61"))  # edited since the run
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(changed), db=db),
        f"study file not included (the file at {study} has changed since the run")
    assert _content(changed)["study"]["yaml"] is None
    _ok(dlperf_main("bundle", "import", str(same), "--db", str(tmp_path / "t.sqlite")),
        "; the study file's text is not stored (a store has no place for it: the bundle keeps it)")


def _content(bundle: Path) -> dict:
    return json.loads(gzip.decompress(bundle.read_bytes()))["content"]


def test_bad_inputs_are_one_line_and_write_nothing(dlperf_main, two_runs, tmp_path):
    source, _, _ = two_runs
    run_id, _ = _first_run(source)
    target = tmp_path / "never.sqlite"
    assert_one_line_error(dlperf_main("bundle", "export", "nope", db=source), "unknown run 'nope'")
    assert_one_line_error(dlperf_main("bundle", "export", "latest", "--db", str(target)), "no results store at")
    assert_one_line_error(dlperf_main("bundle", "export", run_id, "-o", str(tmp_path / "no" / "b.gz"), db=source),
                          "b.gz: cannot write (No such file or directory)")
    assert_one_line_error(dlperf_main("bundle", "export", run_id, "-o", str(tmp_path), db=source), "is a directory")
    assert_one_line_error(dlperf_main("bundle", "import", str(tmp_path / "missing.gz"), "--db", str(target)),
                          "missing.gz: no such file")
    good = tmp_path / "good.gz"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(good), db=source))
    data = good.read_bytes()
    cut, newer, report = tmp_path / "cut.gz", tmp_path / "newer.gz", tmp_path / "export.json"
    cut.write_bytes(data[: len(data) // 3])
    doc = json.loads(gzip.decompress(data))
    newer.write_bytes(gzip.compress(json.dumps({**doc, "format_version": 2}).encode()))
    report.write_text(_ok(dlperf_main("export", run_id, "--format", "json", db=source)))
    other_env = tmp_path / "other_env.gz"  # another machine's fingerprint under this one's hash, checksum remade
    env = doc["content"]["environments"][0]
    env["data"] = {**env["data"], "cpu_model": "another CPU"}
    other_env.write_bytes(gzip.compress(json.dumps({**doc, "checksum": checksum(doc["content"])}).encode()))
    for path, fragment in ((cut, "truncated"), (report, "is not a dlperf bundle"),
                           (newer, "bundle format 2 is newer than this dlperf reads (1): upgrade dlperf"),
                           (other_env, f"environment {env['fingerprint_hash'][:12]}'s fingerprint does not give its "
                                       f"hash")):
        assert_one_line_error(dlperf_main("bundle", "import", str(path), "--db", str(target)), fragment)
    assert not target.exists()  # a refused bundle does not even create the store
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.gz", "export.json", "good.gz", "newer.gz",
                                                          "other_env.gz"]
