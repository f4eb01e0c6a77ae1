"""`dlperf compare RUN@MACHINE`, `show` and `matrix` over a store whose runs span machines (`tests.fleet_store`):
two machines of one fleet run compared case by case, a plain RUN on several machines refused with one line, a
machine column only where a run spans machines, a matrix column per machine of a fleet run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dlperf.report.machines import machine_id
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error
from tests.fleet_store import K1, K2, M1, M2, FleetStore, add_rows_run, fleet_store
from tests.history_store import STUDY, environment

P1 = machine_id(M1)[:6]


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, FleetStore]:
    db = tmp_path / "fleet.sqlite"
    return db, fleet_store(Store(db))


def test_two_machines_of_one_fleet_run_compared_case_by_case(dlperf_main, fleet):
    db, ids = fleet
    res = dlperf_main("compare", f"{ids.fleet}@{P1}", f"{ids.fleet}@w2", db=db)
    assert res.returncode == 0, res.stderr
    assert f"compare A={ids.fleet}@{machine_id(M1)[:8]}  B={ids.fleet}@w2" in res.stdout
    for key in (K1, K2):  # w2 ran 30% slower: one process a side, never the two machines pooled
        line = next(x for x in res.stdout.splitlines() if key in x)
        assert "slower" in line and "processes" not in line
    assert "the two machines' shares come from different environments" in res.stdout
    assert "machine_label: None -> 'w2'" in res.stdout and "hostname_sha256" in res.stdout
    doc = json.loads(dlperf_main("compare", f"{ids.fleet}@{P1}", f"{ids.fleet}@w2", "--format", "json",
                                 db=db).stdout)
    assert doc["machine_a"]["machine_id"] == machine_id(M1) and doc["machine_b"]["name"] == "w2"
    assert [c["verdict"] for c in doc["cases"]] == ["slower", "slower"]
    assert {d["key"] for d in doc["environment_diffs"]} >= {"machine_label", "cpu_model"}


def test_a_machines_share_against_a_local_run_of_that_machine(dlperf_main, fleet):
    db, ids = fleet
    res = dlperf_main("compare", ids.local, f"{ids.fleet}@{P1}", db=db)
    assert res.returncode == 0 and "different environments" not in res.stdout  # the same machine and software
    assert all("only in" not in x for x in res.stdout.splitlines() if K1 in x or K2 in x)
    doc = json.loads(dlperf_main("compare", ids.local, ids.bundle, "--format", "json", db=db).stdout)
    assert doc["machine_a"]["machine_id"] == machine_id(M1)  # plain runs on one machine: as before


def test_a_plain_run_on_several_machines_or_a_bad_machine_is_one_line(dlperf_main, fleet):
    db, ids = fleet
    res = dlperf_main("compare", ids.local, ids.fleet, db=db)
    assert res.returncode == 2
    assert_one_line_error(res, f"run {ids.fleet} ran on 2 machines", machine_id(M1), "w2: ",
                          f"{ids.fleet}@MACHINE (a machine id prefix or a machine label)")
    for ref, fragment in ((f"{ids.fleet}@w9", "'w9' matches no machine"), (f"{ids.fleet}@", "no machine after '@'"),
                          (f"{ids.local}@w2", "'w2' matches no machine of run"), ("nope@w2", "unknown run 'nope'")):
        res = dlperf_main("compare", ids.local, ref, db=db)
        assert res.returncode == 2
        assert_one_line_error(res, fragment)


def test_an_ambiguous_label_is_one_line(dlperf_main, tmp_path):
    db = tmp_path / "dup.sqlite"
    twin = environment("m4") | {"machine_label": "w2"}  # another machine given the same label
    run = add_rows_run(Store(db), 0, M1, [(K1, 0, M2, 1e-3), (K1, 1, twin, 1e-3)], seed=5)
    res = dlperf_main("compare", f"{run}@w2", f"{run}@w2", db=db)
    assert res.returncode == 2
    assert_one_line_error(res, "'w2' is ambiguous: it matches several machines", machine_id(twin))


def test_show_has_a_machine_column_only_for_a_run_on_several_machines(dlperf_main, fleet):
    db, ids = fleet
    res = dlperf_main("show", ids.fleet, db=db)
    assert res.returncode == 0, res.stderr
    header = next(x for x in res.stdout.splitlines() if "framework" in x and "params" in x)
    assert re.search(r"device\s*[│┃]\s*machine\s*[│┃]\s*params", header), header
    rows = [x for x in res.stdout.splitlines() if "dtype=float32" in x]
    assert sum(" w2 " in x for x in rows) == 2 and sum(f" {machine_id(M1)[:8]} " in x for x in rows) == 2
    assert "machines: the results came from 2" in res.stdout and f"machine w2: {machine_id(M2)} (w2: " in res.stdout
    local = dlperf_main("show", ids.local, db=db)
    local_header = next(x for x in local.stdout.splitlines() if "framework" in x and "params" in x)
    assert local.returncode == 0 and re.search(r"device\s*[│┃]\s*params", local_header)
    assert "machines:" not in local.stdout
    md = dlperf_main("report", ids.fleet, "--format", "markdown", db=db)
    assert md.returncode == 0, md.stderr
    assert "| framework | device | machine | params |" in md.stdout and "| numpy | cpu | w2 |" in md.stdout


def test_the_matrix_has_a_column_per_machine_of_a_fleet_run(dlperf_main, fleet):
    db, ids = fleet
    res = dlperf_main("matrix", STUDY, db=db)
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())  # the notes wrap at the terminal's width
    header = next(x for x in res.stdout.splitlines() if "case" in x and "w2: Test CPU m2" in x)
    assert "jetson: ARMv8" in header and "Test CPU m1" in header  # one column per machine, labels first
    assert text.count(f"run {ids.fleet} (a fleet run on 2 machines: this column holds the cases this machine ran)") == 2
    assert f"run {ids.bundle} started" in text and "label jetson, CPU ARMv8 Processor rev 1" in text
    assert ids.local not in text and ids.interrupted not in text
    doc = json.loads(dlperf_main("matrix", STUDY, "--format", "json", db=db).stdout)
    assert sorted((m["run_id"], m["run_machines"]) for m in doc["machines"]) == sorted(
        [(ids.fleet, 2), (ids.fleet, 2), (ids.bundle, 1)])
