"""`dlperf compare RUN@MACHINE`, `show` and `matrix` over a store whose runs span machines (`tests.fleet_store`):
two machines of one fleet run compared case by case, a plain RUN on several machines refused with one line, a
machine column only where a run spans machines, a matrix column per machine of a fleet run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dlperf.hardware.identity import machine_id
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


def _median_ms(line: str) -> float:
    """The median cell of a run table row ('1.3 ms')."""
    return float(re.search(r"│\s+([\d.]+) ms │", line).group(1))  # type: ignore[union-attr]


def test_show_and_report_give_each_machines_figures_and_its_own_study_report(dlperf_main, fleet):
    db, ids = fleet
    res = dlperf_main("show", ids.fleet, db=db)
    assert res.returncode == 0, res.stderr
    rows = {(m, k): x for x in res.stdout.splitlines() for m in ("w2", machine_id(M1)[:8])
            for k in ("size_mb=1.0", "size_mb=2.0") if f"│ {m} " in x and k in x}
    assert len(rows) == 4  # each machine's median, recomputed from its samples
    assert _median_ms(rows[("w2", "size_mb=1.0")]) == pytest.approx(1.3, rel=0.03)
    assert _median_ms(rows[(machine_id(M1)[:8], "size_mb=1.0")]) == pytest.approx(1.0, rel=0.03)
    assert _median_ms(rows[("w2", "size_mb=2.0")]) == pytest.approx(2.6, rel=0.03)
    assert "repetitions in separate worker processes" not in res.stdout  # one process per case and machine
    rep = dlperf_main("report", ids.fleet, db=db)
    assert rep.returncode == 0, rep.stderr
    lines = rep.stdout.splitlines()
    heads = [i for i, x in enumerate(lines) if x.startswith(("machine w2: ", f"machine {machine_id(M1)[:8]}: "))]
    assert len(heads) == 2 and "never pooled" in lines[heads[0] - 1]
    md = dlperf_main("report", ids.fleet, "--format", "markdown", db=db)
    assert "## machine w2: " in md.stdout and f"## machine {machine_id(M1)[:8]}: " in md.stdout
    local = dlperf_main("report", ids.local, db=db)  # one machine: no heading, no machine column
    assert not any(x.startswith(("machine ", "this run's results came from")) for x in local.stdout.splitlines())


def test_verdicts_judge_one_machine_of_a_fleet_run(dlperf_main, fleet):
    db, ids = fleet
    assert_one_line_error(dlperf_main("verdicts", ids.fleet, db=db), f"run {ids.fleet} ran on 2 machines",
                          f"{ids.fleet}@MACHINE")
    res = dlperf_main("verdicts", f"{ids.fleet}@w2", "--format", "json", db=db)
    assert res.returncode == 0, res.stderr
    assert [r["id"] for r in json.loads(res.stdout)["runs"]] == [f"{ids.fleet}@w2"]
    store = Store(db)
    with store.engine.begin() as conn:  # the fleet run and the local one as runs of a claim study
        from sqlalchemy import update

        from dlperf.store.schema import runs
        conn.execute(update(runs).where(runs.c.id.in_([ids.fleet, ids.local])).values(study="ops"))
    res = dlperf_main("verdicts", "--format", "json", db=db)  # the newest ops run spans machines: passed over
    doc = json.loads(res.stdout)
    assert [r["id"] for r in doc["runs"]] == [ids.local] and doc["passed_over_several_machines"] == [ids.fleet]
    line = " ".join(dlperf_main("verdicts", db=db).stdout.split())
    assert f"passed over (results from several machines, never judged pooled; judge one machine's share as " \
           f"RUN@MACHINE): {ids.fleet}" in line


def test_the_html_report_draws_each_machines_study_report(dlperf_main, fleet, tmp_path):
    db, ids = fleet
    out = tmp_path / "fleet.html"
    res = dlperf_main("report", ids.fleet, "--format", "html", "-o", str(out), db=db)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert page.count("machine w2: ") >= 1 and f"machine {machine_id(M1)[:8]}: " in page
    assert f"Not judged: {ids.fleet} ran on several machines" in page
