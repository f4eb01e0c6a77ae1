"""`dlperf history` and `dlperf matrix` as a CI and a person use them, on seeded synthetic stores: the exit
status of --fail-on-regression (compare's code on a regression, 0 on a flat series), one timeline per
machine, --format json and markdown, figures, and one-line errors for an unknown study, machine or case."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dlperf.cli.compare import REGRESSION_EXIT
from dlperf.hardware.identity import machine_id
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error
from tests.history_store import KEY, STUDY, add_run, environment, levels, series_store

M1, M2 = machine_id(environment("m1")), machine_id(environment("m2"))


@pytest.fixture
def step_db(tmp_path: Path) -> Path:
    """12 runs on one machine with a 30% step in the newest run."""
    db = tmp_path / "step.sqlite"
    series_store(Store(db), levels(12, step_at=11, seed=21), seed=21)
    return db


@pytest.fixture
def flat_db(tmp_path: Path) -> Path:
    db = tmp_path / "flat.sqlite"
    series_store(Store(db), levels(12, seed=22, run_sigma=0.02), seed=22)
    return db


@pytest.fixture
def fleet_db(tmp_path: Path) -> Path:
    """Two machines: m1 (3 runs, cases 1 and 2, then an interrupted run) and m2 (2 runs, case 2 times out)."""
    db = tmp_path / "fleet.sqlite"
    store = Store(db)
    for i in range(3):
        add_run(store, i, {KEY.format(1): 1e-3, KEY.format(2): 2e-3}, seed=i, machine="m1")
    add_run(store, 3, {KEY.format(1): 1e-3}, seed=3, machine="m1", status="interrupted")
    for i in range(2):
        add_run(store, 10 + i, {KEY.format(1): 3e-3, KEY.format(2): "timeout"}, seed=10 + i, machine="m2")
    return db


def test_a_regression_in_the_newest_run_exits_with_compares_code(dlperf_main, step_db):
    res = dlperf_main("history", STUDY, "--fail-on-regression", "10", db=step_db)
    assert res.returncode == REGRESSION_EXIT == 1
    assert res.stderr.startswith("dlperf: 1 case(s) failed the gate at +10%") and KEY.format(1) in res.stderr
    assert "slower (REGRESSION)" in res.stdout and "#12 +3" in res.stdout  # the change point at run 12, +30%
    assert f"machine {M1}" in res.stdout
    # without the gate: the same table, exit 0
    plain = dlperf_main("history", STUDY, db=step_db)
    assert plain.returncode == 0 and plain.stderr == "" and "slower" in plain.stdout


def test_a_flat_series_passes_the_gate(dlperf_main, flat_db):
    res = dlperf_main("history", STUDY, "--fail-on-regression", "10", db=flat_db)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "gate at +10%: no regression" in res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("│ " + KEY.format(1)) and "no change" in x)
    assert "none" in line  # no change point


def test_json_holds_every_point_and_the_gate(dlperf_main, step_db):
    res = dlperf_main("history", STUDY, "--format", "json", "--fail-on-regression", "10", db=step_db)
    assert res.returncode == REGRESSION_EXIT
    doc = json.loads(res.stdout)
    (timeline,) = doc["timelines"]
    (case,) = timeline["cases"]
    assert len(case["points"]) == 12 and all(p["median_s"] > 0 and p["ci_low_s"] < p["median_s"] < p["ci_high_s"]
                                             for p in case["points"])
    assert case["change_runs"] == [12] and case["newest"]["regression"] is True
    assert doc["regressions"] == [{"machine_id": M1, "case_key": KEY.format(1), "verdict": "slower",
                                   "reason": "threshold 10%; run-to-run spread of the 11 baseline runs x1.025 (95% "
                                             "prediction of one more run), allowed for"}]


def test_two_machines_print_two_labelled_timelines_and_a_two_column_matrix(dlperf_main, fleet_db):
    res = dlperf_main("history", STUDY, db=fleet_db)
    assert res.returncode == 0, res.stderr
    assert "2 machines (one timeline each, never merged)" in res.stdout
    assert f"machine {M1}: Test CPU m1" in res.stdout and f"machine {M2}: Test CPU m2" in res.stdout
    assert "interrupted" in res.stdout
    only = dlperf_main("history", STUDY, "--machine", M2[:5], db=fleet_db)
    assert only.returncode == 0 and M2 in only.stdout and M1 not in only.stdout

    mat = dlperf_main("matrix", STUDY, db=fleet_db)
    assert mat.returncode == 0, mat.stderr
    header = next(x for x in mat.stdout.splitlines() if "Test CPU m1" in x and "Test CPU m2" in x)
    assert header.count("Test CPU") == 2
    row2 = next(x for x in mat.stdout.splitlines() if KEY.format(2) in x)
    # m2 timed out; m1 ran it: its median with the 95% interval
    assert "missing (timeout)" in row2 and re.search(r"│ (1\.99|2|2\.0\d) ms \[[\d.]+ ms, [\d.]+ ms\]", row2)
    assert "host-m1" in mat.stdout and "host-m2" in mat.stdout  # each machine's identity
    doc = json.loads(dlperf_main("matrix", STUDY, "--format", "json", db=fleet_db).stdout)
    assert {m["machine_id"] for m in doc["machines"]} == {M1, M2}
    # m1's newest complete run is run 2, not the interrupted run 3
    assert next(m for m in doc["machines"] if m["machine_id"] == M1)["started_at"].startswith("2026-01-01T02:")


def test_markdown_and_figures(dlperf_main, step_db, tmp_path):
    out = tmp_path / "h.md"
    res = dlperf_main("history", STUDY, "--format", "markdown", "-o", str(out), "--plot-dir",
                      str(tmp_path / "plots"), db=step_db)
    assert res.returncode == 0 and res.stderr == f"wrote {out}\n"
    text = out.read_text()
    assert f"## Machine {M1}" in text and "| case |" in text and "![history of ops/numpy/cpu" in text
    assert sorted(p.suffix for p in (tmp_path / "plots").iterdir()) == [".png", ".svg"]


@pytest.mark.parametrize(("args", "fragment"), [
    (("history", "nope"), "no runs of study 'nope'"),
    (("matrix", "nope"), "no runs of study 'nope'"),
    (("history", STUDY, "--machine", "zzz"), "--machine 'zzz' matches no machine"),
    (("history", STUDY, "--case", "no-such"), "--case 'no-such': no case"),
    (("history", STUDY, "--fail-on-regression", "-3"), "must be a finite percentage"),
])
def test_bad_input_is_one_line(dlperf_main, fleet_db, args, fragment):
    assert_one_line_error(dlperf_main(*args, db=fleet_db), fragment)


def test_matrix_without_a_complete_run_is_one_line(dlperf_main, tmp_path):
    db = tmp_path / "x.sqlite"
    add_run(Store(db), 0, {KEY.format(1): 1e-3}, seed=0, status="interrupted")
    assert_one_line_error(dlperf_main("matrix", STUDY, db=db), "no complete run of study")


def test_history_and_matrix_as_html_pages(dlperf_main, fleet_db, tmp_path):
    """--format html: one self-contained page each (no web address, the figures inline, the JSON embedded),
    with both machines named and never merged."""
    from dlperf.report.html.embed import extract

    res = dlperf_main("history", STUDY, "--format", "html", "-o", str(tmp_path / "h.html"), db=fleet_db)
    assert res.returncode == 0 and res.stdout.startswith(f"wrote {tmp_path / 'h.html'} (")
    page = (tmp_path / "h.html").read_text()
    assert not re.search(r"https?://", page) and "<link" not in page
    assert f"Machine {M1}" in page and f"Machine {M2}" in page
    assert page.count("<svg") >= 2  # a history figure per machine's case group, inlined
    data = extract(page)
    assert {t["machine_id"] for t in data["timelines"]} == {M1, M2}

    res = dlperf_main("matrix", STUDY, "--format", "html", db=fleet_db)  # default: reports/matrix-STUDY.html
    out = Path("reports") / f"matrix-{STUDY}.html"
    assert res.returncode == 0 and out.exists(), res.stderr
    page = out.read_text()
    assert not re.search(r"https?://", page) and page.count("<th") >= 3  # case + one column per machine
    assert len(extract(page)["machines"]) == 2


def test_the_run_report_has_its_studys_history_on_its_machine(dlperf_main, fleet_db, tmp_path):
    """The HTML report of a run shows the study's timeline on the run's machine (not the other machine's);
    a machine with one run of the study gets no history part."""
    store = Store(fleet_db)
    runs = store.runs_of_study(STUDY)
    m1_run = next(r.id for r in runs if machine_id(store.run_environment(r.id)) == M1)
    res = dlperf_main("report", m1_run, "--format", "html", "-o", str(tmp_path / "r.html"), db=fleet_db)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text()
    assert "History of this study on this machine" in page and f"Machine {M1}" in page
    assert f"Machine {M2}" not in page


@pytest.mark.parametrize("name, stem", [("ops", "ops"), ("../../etc/passwd", "_._.._etc_passwd"), ("a/b c", "a_b_c"),
                                        ("..", "_."), ("x\n\x1b[2J", "x___2J"), ("é" * 300, "_" * 100)])
def test_a_study_name_from_a_store_is_a_safe_default_file_name(name, stem):
    """history and matrix name their default page after the study through `untrusted.path_component` (the
    fence where data becomes a path): a name from a store or a bundle made elsewhere never becomes a path
    outside reports/."""
    from dlperf.untrusted import path_component

    assert path_component(name, 100) == stem
    assert "/" not in path_component(name, 100) and len(path_component("x" * 500, 100)) == 100
