"""Data from outside as a user meets it (issue 29, findings 1-4 and 8): `bundle export` replaces a bundle only
with --force and never the store; a bundle's parameters are checked against the workload's; a FIFO is refused
at once; a run id that climbs out of a folder writes nothing outside reports/; ids, study paths and errors
holding escape sequences or rich markup are printed as data; a study nested hundreds deep is one line."""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from dlperf.core.result import case_key
from dlperf.store.bundle import checksum
from tests.cli.conftest import STUDIES, assert_one_line_error
from tests.cli.test_bundle_cli import _first_run, _ok
from tests.conftest import run_cli

EVIL = "evil\x1b[2J\x1b]0;owned\x07[bold]x[/bold]\nall ok"


def _renamed(source: Path, tmp_path: Path, new_id: str) -> tuple[Path, str]:
    """A copy of the store whose first run is called `new_id` (as a store another machine wrote may hold)."""
    db = tmp_path / "renamed.sqlite"
    shutil.copy(source, db)
    run_id, _ = _first_run(source)
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        for table, column in (("runs", "id"), ("results", "run_id"), ("run_leases", "run_id")):
            conn.execute(text(f"UPDATE {table} SET {column} = :new WHERE {column} = :old"),
                         {"new": new_id, "old": run_id})
    engine.dispose()
    return db, new_id


def test_export_replaces_a_bundle_only_with_force_and_never_the_store(dlperf_main, two_runs, tmp_path):
    source, _, _ = two_runs
    run_id, _ = _first_run(source)
    store = tmp_path / "store.sqlite"
    shutil.copy(source, store)
    before = store.read_bytes()
    ro = f"sqlite:///file:{store}?mode=ro&uri=true"
    assert_one_line_error(dlperf_main("bundle", "export", run_id, "-o", str(store), "--force", "--db", ro),
                          "this store's own database file")
    assert store.read_bytes() == before
    out = tmp_path / "b.dlperf.json.gz"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(out), db=store))
    assert_one_line_error(dlperf_main("bundle", "export", run_id, "-o", str(out), db=store),
                          "already exists (a bundle): give --force to replace it")
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(out), "--force", db=store), f"wrote {out}")


def _tampered(good: Path, out: Path, change, *, rekey: bool = False) -> Path:
    """`good` with `change(content)` applied and its checksum recomputed; `rekey`: each result's case key made
    again from its fields, as a careful forger would (so that what is checked next is reached)."""
    doc = json.loads(gzip.decompress(good.read_bytes()))
    change(doc["content"])
    for r in doc["content"]["results"] if rekey else ():
        r["case_key"] = case_key(r["workload"], r["framework"], r["device"], r["params"])
    doc["checksum"] = checksum(doc["content"])
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def test_parameters_are_checked_against_the_workload(dlperf_main, two_runs, tmp_path):
    """A `</script>` op imported fine and stopped every report of the run (exit 70): refused, naming the field."""
    source, _, _ = two_runs
    run_id, _ = _first_run(source)
    good, target = tmp_path / "good.gz", tmp_path / "never.sqlite"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(good), db=source))
    cases = [
        (lambda c: c["results"][0]["params"].update(op="</script><script>alert(2)</script>"), "params.op"),
        (lambda c: c["results"][0]["params"].update(size_mb=-1), "params.size_mb"),
        (lambda c: c["results"][0]["params"].update(extra=1), "params.extra"),
        # a parameter left out imported with the workload's default in mind, then the reports' reads failed
        (lambda c: c["results"][0]["params"].pop("dtype"), "params.dtype: missing"),
        (lambda c: c["results"][0].update(workload="nosuch"), "workload 'nosuch' is not one this dlperf knows"),
    ]
    for i, (change, fragment) in enumerate(cases):
        bad = _tampered(good, tmp_path / f"bad{i}.gz", change, rekey=True)
        assert_one_line_error(dlperf_main("bundle", "import", str(bad), "--db", str(target)), fragment,
                              "nothing was imported")
    assert not target.exists()


def _digest(db: Path) -> str:
    """The store's bytes, its WAL's included (a refused import must leave both as they were)."""
    gc.collect()  # the command's engines go: their connections close
    wal = db.with_name(db.name + "-wal")
    return hashlib.sha256(db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).hexdigest()


def test_a_case_key_that_its_params_do_not_give_is_one_line_and_the_store_unchanged(dlperf_main, two_runs,
                                                                                   tmp_path):
    """Finding 3: results are matched by case key, so a bundle whose key another case's params give would
    replace that case. Refused naming the case, the run and the field; the store keeps every byte."""
    source, _, _ = two_runs
    run_id, _ = _first_run(source)
    good, other, target = tmp_path / "good.gz", tmp_path / "other.gz", tmp_path / "target.sqlite"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(good), db=source))
    _ok(dlperf_main("bundle", "export", "latest", "-o", str(other), db=source))
    _ok(dlperf_main("bundle", "import", str(other), "--db", str(target)))  # a store that lacks the first run
    before = _digest(target)

    def swap(c):  # the first result under the second's key, its own params kept, the second left out
        c["results"][0]["case_key"] = c["results"].pop(1)["case_key"]

    def edit_params(c):  # a parameter changed, the key left as the run made it
        c["results"][0]["params"]["size_mb"] = 0.5
    for i, change in enumerate((swap, edit_params)):
        bad = _tampered(good, tmp_path / f"bad{i}.gz", change)
        key = json.loads(gzip.decompress(bad.read_bytes()))["content"]["results"][0]["case_key"]
        assert_one_line_error(dlperf_main("bundle", "import", str(bad), "--db", str(target)), f"result {key!r}",
                              f"of run {run_id}: its case_key is not the one", "nothing was imported")
        assert _digest(target) == before
    _ok(dlperf_main("bundle", "import", str(good), "--db", str(target)), f"run {run_id}: ")  # the check can pass


def test_import_limits_are_one_line(dlperf_main, two_runs, tmp_path):
    source, _, _ = two_runs
    run_id, _ = _first_run(source)
    good, target = tmp_path / "good.gz", tmp_path / "never.sqlite"
    _ok(dlperf_main("bundle", "export", run_id, "-o", str(good), db=source))
    assert_one_line_error(dlperf_main("bundle", "import", str(good), "--max-mb", "0.001", "--db", str(target)),
                          "more than 0.001 MB", "--max-mb")
    fifo = tmp_path / "pipe.gz"
    os.mkfifo(fifo)
    res = run_cli("bundle", "import", str(fifo), "--db", str(target), timeout=60)  # in a subprocess: a hang ends
    assert_one_line_error(res, "is a FIFO (named pipe), not a regular file")
    assert not target.exists()


def test_a_run_id_that_climbs_writes_nothing_outside_reports(dlperf_main, two_runs, tmp_path):
    """A store written elsewhere may hold any id (a bundle's are checked at import; this is the second fence)."""
    source, _, _ = two_runs
    db, run_id = _renamed(source, tmp_path, "../../climbed")
    work = tmp_path / "work"
    work.mkdir()
    os.chdir(work)
    _ok(dlperf_main("report", run_id, "--db", str(db)))
    assert_one_line_error(dlperf_main("bundle", "export", run_id, "--db", str(db)),  # no import would take it
                          "_._.._climbed.dlperf.json.gz (not written: run '../../climbed'", "the run's id: not an id")
    assert not (tmp_path / "climbed").exists() and not (tmp_path.parent / "climbed").exists()
    written = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    assert written and all(p.startswith("reports/_._.._climbed/") for p in written), written


def _no_control(res) -> None:
    for stream in (res.stdout, res.stderr):
        assert "\x1b" not in stream and "\x07" not in stream and "\nall ok" not in stream, stream


def test_data_from_outside_is_printed_as_data(dlperf_main, two_runs, tmp_path):
    """Escape sequences, an OSC title, a newline (a fake "all ok" line) and rich markup in a run id."""
    source, _, _ = two_runs
    db, run_id = _renamed(source, tmp_path, EVIL)
    spelled = "evil\\x1b[2J\\x1b]0;owned\\x07[bold]x[/bold]\\nall ok"
    for command in (("runs",), ("show", run_id)):
        res = dlperf_main(*command, "--db", str(db))
        _ok(res, spelled)
        _no_control(res)
    res = dlperf_main("show", run_id + "-nope", "--db", str(db))
    assert_one_line_error(res, "unknown run")
    _no_control(res)


def test_a_study_path_with_escapes_is_printed_as_data(dlperf_main, tmp_path):
    study = tmp_path / "s\x1b[2J[red]x\n.yaml"
    shutil.copy(STUDIES / "many_ok.yaml", study)
    res = dlperf_main("plan", str(study), db=tmp_path / "r.sqlite")
    _ok(res, "s\\x1b[2J[red]x\\n.yaml")
    _no_control(res)
    missing = dlperf_main("plan", str(tmp_path / "gone\x1b[2J\n.yaml"))
    assert_one_line_error(missing, "gone\\x1b[2J\\n.yaml")


@pytest.mark.parametrize("depth", [100, 600])
def test_a_study_nested_deep_is_one_line(dlperf_main, tmp_path, depth):
    study = tmp_path / "deep.yaml"
    study.write_text((STUDIES / "many_ok.yaml").read_text() + "exclude: " + "[" * depth + "]" * depth + "\n")
    res = dlperf_main("plan", str(study))
    assert res.returncode not in (0, 70)
    assert_one_line_error(res, "nested more than 64 deep")
