"""History and the HTML report over runs whose results came from several machines (`tests.fleet_store`): each
machine's share of a fleet run is a point on that machine's own timeline (never pooled with another machine's
samples), the regression gate judges each machine on its own, and the HTML page of a fleet run has a machine
column and lists every machine of the run, while a run on one machine's page has neither."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlperf.analysis.history import StudyHistory, build_history
from dlperf.cli import cli
from dlperf.cli.compare import REGRESSION_EXIT
from dlperf.cli.readers import result_environments
from dlperf.hardware.identity import machine_id
from dlperf.report.history_report import FLEET_NOTE, history_json, history_sections
from dlperf.report.html.embed import extract
from dlperf.report.sections import Table
from dlperf.store import Store
from tests.fleet_store import K1, K2, M1, M2, M3, FleetStore, add_rows_run, fleet_store
from tests.history_store import STUDY

ID1, ID2, ID3 = machine_id(M1), machine_id(M2), machine_id(M3)


def read(store: Store, **kwargs: object) -> StudyHistory:
    """The history of STUDY as `dlperf history` reads it (every environment its results name)."""
    runs = store.runs_of_study(STUDY)
    results = {r.id: store.results(r.id) for r in runs}
    envs = {r.id: store.run_environment(r.id) for r in runs}
    return build_history(STUDY, runs, envs, results, result_envs=result_environments(
        store, runs, (r for rs in results.values() for r in rs)), **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Store, FleetStore]:
    store = Store(tmp_path / "fleet.sqlite")
    return store, fleet_store(store)


def test_a_fleet_runs_machines_are_points_on_their_own_timelines(fleet):
    store, ids = fleet
    hist = read(store)
    lines = {t.machine_id: t for t in hist.timelines}
    assert set(lines) == {ID1, ID2, ID3}
    assert [r.run_id for r in lines[ID1].runs] == [ids.local, ids.fleet, ids.interrupted]
    assert [r.run_id for r in lines[ID2].runs] == [ids.fleet, ids.interrupted]  # M2 never ran a run of its own
    assert [r.run_id for r in lines[ID3].runs] == [ids.bundle]
    assert [r.machines for r in lines[ID1].runs] == [1, 2, 2] and [r.machines for r in lines[ID2].runs] == [2, 2]
    assert lines[ID2].label.startswith("w2: ")

    def point(mid: str, key: str, run_number: int):
        case = next(c for c in lines[mid].cases if c.case_key == key)
        return case.points[run_number - 1]

    # the fleet run: K1 ran once on each machine, M2 30% slower; one process each, never the two pooled
    p1, p2 = point(ID1, K1, 2), point(ID2, K1, 1)
    assert p1.processes == 1 and p2.processes == 1
    assert p1.median_s == pytest.approx(1.0e-3, rel=0.03) and p2.median_s == pytest.approx(1.3e-3, rel=0.03)
    assert point(ID2, K2, 1).median_s == pytest.approx(2.6e-3, rel=0.03)
    # the interrupted run: K1 on M2 only, K2 on M1 only; the other machine's timeline has no such point
    assert point(ID1, K1, 3).status == "not run" and point(ID2, K2, 2).status == "not run"

    runs_doc = {t["machine_id"]: t["runs"] for t in history_json(hist)["timelines"]}
    assert [r["machines"] for r in runs_doc[ID2]] == [2, 2] and runs_doc[ID3][0]["machines"] == 1
    sections = history_sections(hist)
    tables = {s.title: s for s in sections if isinstance(s, Table) and s.title.startswith("runs of")}
    assert [row[3] for row in tables[f"runs of {STUDY} on machine {ID2}"].rows] == [
        "complete (fleet run, 2 machines)", "interrupted (fleet run, 2 machines)"]
    assert tables[f"runs of {STUDY} on machine {ID2}"].intro == FLEET_NOTE
    assert tables[f"runs of {STUDY} on machine {ID3}"].intro is None  # a bundle's run: one machine


def test_a_machine_is_picked_by_label_or_id_and_no_result_is_put_on_a_machine_it_did_not_run_on(fleet):
    store, ids = fleet
    assert [t.machine_id for t in read(store, machine="w2").timelines] == [ID2]
    assert [t.machine_id for t in read(store, machine=ID1[:6]).timelines] == [ID1]
    runs = store.runs_of_study(STUDY)
    with pytest.raises(KeyError):  # without the results' own environments M2's rows have no machine: refused
        build_history(STUDY, runs, {r.id: store.run_environment(r.id) for r in runs},
                      {r.id: store.results(r.id) for r in runs})


def test_the_gate_judges_each_machine_of_a_fleet_run_on_its_own(tmp_path: Path):
    """Four fleet runs with K1 on both machines (M2 30% slower), then one where only M2's K1 is 60% slower:
    the gate fails on M2's K1 alone; M1's K1 and both K2 are unchanged."""
    db = tmp_path / "gate.sqlite"
    store = Store(db)
    for n in range(5):
        slow = 1.6 if n == 4 else 1.0
        add_rows_run(store, n, M1, [(K1, 0, M1, 1e-3), (K1, 1, M2, 1.3e-3 * slow), (K2, 0, M1, 2e-3),
                                    (K2, 1, M2, 2.6e-3)], seed=10 + n, filters={"executor": "dask"})
    hist = read(store, fail_pct=10.0)
    assert [(t.machine_id, c.case_key) for t, c in hist.failures()] == [(ID2, K1)]
    verdicts = {(t.machine_id, c.case_key): c.newest.verdict for t in hist.timelines for c in t.cases}
    assert verdicts == {(ID1, K1): "no change", (ID1, K2): "no change", (ID2, K1): "slower",
                        (ID2, K2): "no change"}

    res = CliRunner().invoke(cli, ["history", STUDY, "--fail-on-regression", "10", "--db", str(db)],
                             catch_exceptions=False)
    assert res.exit_code == REGRESSION_EXIT
    assert f"1 case(s) failed the gate at +10%: {K1} on machine {ID2} (slower)" in res.stderr
    assert f"machine {ID1}: Test CPU m1" in res.stdout and f"machine {ID2}: w2: Test CPU m2" in res.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, FleetStore]:
    """One HTML page of the fleet run and the local run (two parts), as `dlperf report --format html` writes it."""
    tmp = tmp_path_factory.mktemp("fleet-html")
    ids = fleet_store(Store(tmp / "fleet.sqlite"))
    out = tmp / "page.html"
    res = CliRunner().invoke(cli, ["report", ids.fleet, ids.local, "--format", "html", "-o", str(out), "--db",
                                   str(tmp / "fleet.sqlite")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8"), ids


def part(html: str, anchor: str) -> str:
    """The HTML of one subsection of the page (`run-1-results` ...), up to the next one."""
    start = html.index(f'<details open id="{anchor}">')
    end = html.find("<details open id=", start + 1)
    return html[start:end if end > 0 else len(html)]


def headers(fragment: str) -> list[str]:
    """The column headers of the first table in `fragment`."""
    table = fragment[fragment.index("<table"):fragment.index("</thead>")]
    return [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]


def test_the_page_of_a_fleet_run_has_a_machine_column_and_every_machine(page):
    html, ids = page
    results = part(html, "run-1-results")
    cols = headers(results)
    assert cols[cols.index("device") + 1] == "machine"
    assert ">w2<" in results and f">{ID1[:8]}<" in results  # each row names the machine that ran it
    env = part(html, "run-1-env")
    assert "Machines of this run" in env and "The results of this run came from 2 machines" in env
    assert ID1 in env and ID2 in env and "Test CPU m2" in env and "Machine w2" in env
    assert f"Machine {ID1[:8]}" not in env  # the submitting machine's environment is the run's own, shown once
    history = part(html, "run-1-history")
    assert "History of this study on its machines" in history
    assert f"Machine {ID1}" in history and f"Machine {ID2}" in history and f"Machine {ID3}" not in history
    doc = extract(html)
    fleet_doc = next(r for r in doc["runs"] if r["run"]["id"] == ids.fleet)
    assert {m["machine_id"] for m in fleet_doc["machines"]} == {ID1, ID2}
    assert {m["name"] for m in fleet_doc["machines"]} == {"w2", ID1[:8]}
    assert "2 machines: " in html[:html.index('id="run-1"')]  # the overview row of the fleet run


def test_the_page_of_a_run_on_one_machine_has_neither(page):
    html, ids = page
    assert "machine" not in headers(part(html, "run-2-results"))
    assert "Machines of this run" not in part(html, "run-2-env")
    history = part(html, "run-2-history")  # M1's timeline only: the local run, the fleet's and the interrupted
    assert "History of this study on this machine" in history
    assert f"Machine {ID1}" in history and f"Machine {ID2}" not in history
    assert "machines" not in next(r for r in extract(html)["runs"] if r["run"]["id"] == ids.local)
