"""A bundle is untrusted input (issue 29, findings 1-4 and 9): `bundle export -o` never replaces what is not a
bundle (a device, a FIFO, a database, the store itself through its read-only URL) and replaces a bundle only
when told; ids that could climb out of a folder, values wider than the store's columns, a decompression bomb,
deep nesting and a FIFO are each refused in one line, with nothing written."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from pathlib import Path

import pytest

from dlperf.core.result import case_key
from dlperf.store import Store
from dlperf.store.bundle import BundleError, export_bundle, read_bundle
from dlperf.store.schema import runs
from dlperf.untrusted import deeper_than, is_id, not_regular, path_component, printable
from tests.store.test_bundle import _count, _crafted, _refused, _source

SQLITE_MAGIC = b"SQLite format 3\x00"


@pytest.fixture
def source(tmp_path: Path) -> tuple[Store, str]:
    store, run_id, *_ = _source(tmp_path)
    return store, run_id


@pytest.fixture
def bundle_file(source: tuple[Store, str], tmp_path: Path) -> Path:
    path = tmp_path / "b.dlperf.json.gz"
    export_bundle(*source, path)
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- finding 1: what -o may replace ------------------------------------------------------------------------
def test_the_read_only_url_of_the_store_is_its_own_file(source, tmp_path):
    """The URL form docs/trust.md recommends for reading a read-only store: the bundle must not replace that store."""
    store, run_id = source
    db = tmp_path / "src.sqlite"
    ro = Store(f"sqlite:///file:{db}?mode=ro&uri=true")
    with pytest.raises(BundleError, match="this store's own database file"):
        export_bundle(ro, run_id, db, force=True)
    assert db.read_bytes().startswith(SQLITE_MAGIC) and len(store.results(run_id)) == 3


def test_no_sqlite_database_is_replaced_whatever_its_name(source, tmp_path):
    store, run_id = source
    other = tmp_path / "looks-like-a.dlperf.json.gz"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    before = other.read_bytes()
    for force in (False, True):
        with pytest.raises(BundleError, match=r"is an SQLite database.*not replaced"):
            export_bundle(store, run_id, other, force=force)
    assert other.read_bytes() == before and _leftovers(tmp_path) == []


def test_nothing_but_a_regular_file_is_replaced(source, tmp_path):
    """A FIFO, a link to one, a device: refused (os.replace would put a regular file in their place)."""
    store, run_id = source
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "to-pipe").symlink_to(fifo)
    for target, what in ((fifo, "FIFO"), (tmp_path / "to-pipe", "FIFO"), (Path("/dev/null"), "device")):
        with pytest.raises(BundleError, match=f"{what}.*not a regular file"):
            export_bundle(store, run_id, target, force=True)
    assert fifo.is_fifo() and (tmp_path / "to-pipe").is_symlink() and _leftovers(tmp_path) == []


def test_a_bundle_is_replaced_only_with_force_and_nothing_else_ever(source, bundle_file, tmp_path):
    store, run_id = source
    with pytest.raises(BundleError, match="already exists.*--force"):
        export_bundle(store, run_id, bundle_file)
    store.set_run_status(run_id, "failed")
    export_bundle(store, run_id, bundle_file, force=True)
    assert read_bundle(bundle_file).run["status"] == "failed"
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(BundleError, match="not a dlperf bundle"):
        export_bundle(store, run_id, notes, force=True)
    assert notes.read_text() == "my notes\n" and _leftovers(tmp_path) == []


def test_a_failed_write_leaves_no_temporary_file(source, tmp_path, monkeypatch):
    store, run_id = source

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(BundleError, match="No space left on device"):
        export_bundle(store, run_id, tmp_path / "b.gz")
    assert not (tmp_path / "b.gz").exists() and _leftovers(tmp_path) == []


# -- finding 2: ids that could name a path ------------------------------------------------------------------
@pytest.mark.parametrize(("change", "fragment"), [
    (lambda c: c["run"].update(id="../../../tmp/x/evil"), "the run's id"),
    (lambda c: c["run"].update(id="/tmp/x/abs"), "the run's id"),
    (lambda c: c["run"].update(id=".."), "the run's id"),
    (lambda c: c["run"].update(id="run\x1b[2J"), "the run's id"),
    (lambda c: c["run"].update(study="../s"), "the run's study"),
    (lambda c: c["run"].update(variant="quick\nall ok"), "the run's variant"),
    (lambda c: c["run"].update(study="s" * 129), "the run's study"),
    (lambda c: c["run"].update(dlperf_version="0.1\x1b]0;owned\x07"), "the run's dlperf_version"),
    (lambda c: c["results"][0].update(case_key="x" * 4097), "case_key"),
    (lambda c: c["results"][0].update(case_key="ops/numpy/cpu/n=0\x1b[2J"), "case_key"),
    (lambda c: c["results"][0].update(workload="ops/../x"), "workload"),
    (lambda c: c["results"][0].update(framework="num py"), "framework"),
    (lambda c: c["results"][0].update(device="cpu/.."), "device"),
    (lambda c: c["results"][0].update(status="ok\n"), "status"),
])
def test_an_id_that_is_not_strict_is_refused(bundle_file, tmp_path, change, fragment):
    _refused(Store(tmp_path / "dst.sqlite"), _crafted(bundle_file, change), "malformed", fragment)


# -- finding 3: a result's case key is the one its own fields give ---------------------------------------------
def _other_case(c):
    c["results"][0]["case_key"] = c["results"][1]["case_key"]  # it would replace or hide that case


@pytest.mark.parametrize("change", [
    _other_case,
    lambda c: c["results"][0]["params"].update(n=7),  # the params edited, the key left as it was
    lambda c: c["results"][0].update(framework="torch"),
    lambda c: c["results"][0].update(device="cuda"),
    lambda c: c["results"][0].update(workload="mlp"),
    lambda c: c["results"][0].update(case_key=c["results"][0]["case_key"] + ",x=1"),
])
def test_a_case_key_its_fields_do_not_give_is_refused(bundle_file, tmp_path, change):
    """Results are matched by case key (a re-run replaces the stored one): a key that another case's fields
    give, or that its own do not, is refused naming the case, the run and the field."""
    content = json.loads(gzip.decompress(bundle_file.read_bytes()))["content"]
    run_id, first = content["run"]["id"], content["results"][0]
    assert first["case_key"] == case_key(first["workload"], first["framework"], first["device"], first["params"])
    _refused(Store(tmp_path / "dst.sqlite"), _crafted(bundle_file, change), "malformed",
             f"of run {run_id}: its case_key is not the one its workload, framework, device and params give")


def test_an_environment_hash_that_is_not_an_id_is_refused(bundle_file, tmp_path):
    def change(c):
        old = c["environments"][0]["fingerprint_hash"]
        c["environments"][0]["fingerprint_hash"] = "../x"
        for row in (c["run"], *c["results"]):
            if row["env_fingerprint_hash"] == old:
                row["env_fingerprint_hash"] = "../x"
    _refused(Store(tmp_path / "dst.sqlite"), _crafted(bundle_file, change), "malformed", "fingerprint_hash")


def test_the_column_widths_are_the_schemas():
    """The shape's limits are read from the tables (a migration that widens a column widens the check)."""
    from annotated_types import MaxLen

    from dlperf.store.bundle.shape import RunRow

    def widths(field):
        return [m.max_length for m in RunRow.model_fields[field].metadata if isinstance(m, MaxLen)]

    assert widths("study") == [runs.c.study.type.length] and widths("id") == [runs.c.id.type.length]
    # the variant is text of any length since schema version 4 (a maxbatch run's variant is long): no width
    assert runs.c.variant.type.length is None and widths("variant") == []


def test_a_known_run_with_another_study_name_is_refused(bundle_file, tmp_path):
    """The same id and study hash, another study name: not the same run (issue 29, finding 9)."""
    from tests.store.test_bundle import _import

    dst = Store(tmp_path / "dst.sqlite")
    _import(dst, bundle_file)
    renamed = _crafted(bundle_file, lambda c: c["run"].update(study="another"))
    before = _count(dst, runs)
    with pytest.raises(BundleError, match="already in this store with another study name"):
        _import(dst, renamed)
    assert _count(dst, runs) == before and dst.run(read_bundle(bundle_file).run["id"]).study == "s"


# -- finding 4: size, depth, FIFOs -------------------------------------------------------------------------
def test_a_decompression_bomb_is_refused_without_inflating_it(bundle_file, tmp_path, monkeypatch):
    """The size cap holds while decompressing: the check never holds more than the cap in memory."""
    doc = json.loads(gzip.decompress(bundle_file.read_bytes()))
    doc["padding"] = " " * (3 * 2**20)
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert bomb.stat().st_size < 2**20 // 8
    monkeypatch.setenv("DLPERF_BUNDLE_MAX_MB", "2")
    with pytest.raises(BundleError, match=r"inflates to more than 2 MB .*DLPERF_BUNDLE_MAX_MB"):
        read_bundle(bomb)
    monkeypatch.setenv("DLPERF_BUNDLE_MAX_MB", "4")
    assert read_bundle(bomb).run["id"] == read_bundle(bundle_file).run["id"]
    monkeypatch.setenv("DLPERF_BUNDLE_MAX_MB", "lots")
    with pytest.raises(BundleError, match="DLPERF_BUNDLE_MAX_MB"):
        read_bundle(bomb)


def test_an_uncompressed_file_over_the_cap_is_refused(bundle_file, tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(bundle_file.read_bytes()) + b" " * 2**20)
    with pytest.raises(BundleError, match="more than 1 MB"):
        read_bundle(plain, max_bytes=10**6)


@pytest.mark.parametrize("depth", [100, 5000])
def test_deep_nesting_is_refused_in_one_line(bundle_file, tmp_path, depth):
    def nest(c):
        c["results"][0]["metrics"]["deep"] = json.loads("[" * depth + "]" * depth)
    crafted = _crafted(bundle_file, nest) if depth < 900 else tmp_path / "deep.json"
    if depth >= 900:  # too deep for the writer's own json: spelled by hand
        crafted.write_text('{"format": "dlperf-bundle", "format_version": 1, "content": '
                           + "[" * depth + "]" * depth + "}")
    _refused(Store(tmp_path / "dst.sqlite"), crafted, "nested more than 64 deep")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "b.gz"
    os.mkfifo(fifo)
    with pytest.raises(BundleError, match=r"b\.gz is a FIFO \(named pipe\), not a regular file"):
        read_bundle(fifo)


# -- the helpers -------------------------------------------------------------------------------------------
def test_the_helpers():
    assert is_id("many_ok-20261123-101010-ab12", 128) and not is_id("a" * 129, 128)
    assert not any(is_id(x, 128) for x in ("", ".", "..", "a/b", "a b", "é", "a\n", None, 3))
    assert path_component("../../tmp/x") == "_._.._tmp_x" and path_component("..") == "_."
    assert path_component("ok-1.2") == "ok-1.2" and "/" not in path_component("/abs")
    assert printable("a\x1b[2Jb\nc\u202ed é") == "a\\x1b[2Jb\\nc\\u202ed é"
    assert printable("plain [bold]x[/bold]") == "plain [bold]x[/bold]"
    assert deeper_than(json.loads("[" * 65 + "]" * 65)) and not deeper_than(json.loads("[" * 64 + "]" * 64))
    assert deeper_than({"a": [{"b": 1}]}, 2) and not deeper_than({"a": [1, 2]}, 2)
    assert not_regular(Path("/dev/null")) == "is a device, not a regular file"
    assert not_regular(Path("/nonexistent/x")) is None

