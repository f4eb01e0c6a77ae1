"""A fleet run's reports keep its machines apart (`tests.fleet_store`): the study sections are drawn once per
machine, each on that machine's results and environment, under a heading naming it; the repetitions table groups
a case's processes per machine; and the stored samples give every figure (medians recomputed on load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.analysis.machines import share_names
from dlperf.cli.readers import machine_reports, report_data, run_machines, share_report
from dlperf.errors import DlperfError
from dlperf.hardware.identity import machine_id
from dlperf.report import registry
from dlperf.report.repetitions import across_columns, across_processes
from dlperf.report.sections import Heading, Note
from dlperf.report.study import ReportData
from dlperf.store import Store
from tests.fleet_store import K1, K2, M1, M2, FleetStore, add_rows_run, fleet_store


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Store, FleetStore]:
    store = Store(tmp_path / "fleet.sqlite")
    return store, fleet_store(store)


def test_study_sections_are_drawn_once_per_machine_on_its_own_results(fleet, monkeypatch, tmp_path):
    store, ids = fleet
    seen: list[tuple[str | None, set[int], list[float]]] = []

    def recorder(data: ReportData) -> list:
        seen.append((data.env.get("machine_label"), {r.env_id for r in data.results},
                     sorted(float(r.m.median_s) for r in data.results)))
        return [Note(f"ops report of {len(data.results)} results")]

    monkeypatch.setitem(registry.REPORTS, "ops", recorder)
    data = report_data(store, ids.fleet, tmp_path)
    per_machine = machine_reports(store, data)
    sections = registry.machine_sections(data, per_machine)
    assert len(seen) == 2  # one report per machine, never one over both machines' results
    (label_1, envs_1, medians_1), (label_2, envs_2, medians_2) = sorted(seen, key=lambda s: str(s[0]))
    assert label_1 is None and label_2 == "w2" and envs_1.isdisjoint(envs_2)
    assert medians_1 == pytest.approx([1e-3, 2e-3], rel=0.03)  # M1 ran K1 and K2 at 1 and 2 ms
    assert medians_2 == pytest.approx([1.3e-3, 2.6e-3], rel=0.03)  # w2 30% slower
    headings = [s.text for s in sections if isinstance(s, Heading)]
    terminal = [s.text for s in sections if isinstance(s, Note) and s.markdown == ""]
    assert headings == [f"## {t}" for t in terminal] and len(terminal) == 2
    assert terminal[0].startswith(f"machine {machine_id(M1)[:8]}: {machine_id(M1)}")
    assert terminal[1].startswith(f"machine w2: {machine_id(M2)}") and terminal[1].endswith("2 results")
    # each machine's plots go to a folder of their own; the submitting machine keeps the run's environment
    dirs = {d.plot_dir for _, d in per_machine}
    assert len(dirs) == 2 and all(p.parent == tmp_path for p in dirs)
    own = next(d for s, d in per_machine if s.machine_id == machine_id(M1))
    assert own.env == data.env and own.measured_peaks == data.measured_peaks


def test_a_run_on_one_machine_draws_its_sections_as_before(fleet, monkeypatch, tmp_path):
    store, ids = fleet
    monkeypatch.setitem(registry.REPORTS, "ops", lambda data: [Note(f"{len(data.results)} results")])
    data = report_data(store, ids.local, tmp_path)
    assert machine_reports(store, data) == []
    assert registry.machine_sections(data, machine_reports(store, data)) == registry.study_sections(data)


def test_one_machines_share_as_report_data(fleet):
    store, ids = fleet
    w2 = share_report(store, f"{ids.fleet}@w2", None)
    assert w2.env.get("machine_label") == "w2" and {r.case_key for r in w2.results} == {K1, K2}
    assert all(r.m.median_s > 1.2e-3 for r in w2.results)
    assert share_report(store, ids.local, None).results == store.results(ids.local)
    with pytest.raises(DlperfError, match=f"run {ids.fleet} ran on 2 machines"):
        share_report(store, ids.fleet, None)


def test_repetitions_are_grouped_per_machine(tmp_path):
    store = Store(tmp_path / "reps.sqlite")
    run = add_rows_run(store, 1, M1, [(K1, 0, M1, 1e-3), (K1, 1, M1, 1e-3), (K1, 2, M2, 1.3e-3),
                                      (K2, 0, M2, 2.6e-3), (K2, 1, M1, 2e-3)], seed=5, filters={"executor": "dask"})
    data = report_data(store, run, None)
    names = share_names(run_machines(store, data))
    rows = across_processes(data.results, names)
    # K1: two processes on M1 (a process-to-process spread of a few %), w2's one alone; K2: one per machine
    assert across_columns(names)[:3] == ("case", "machine", "processes")
    assert [r[:3] for r in rows] == [[K1, machine_id(M1)[:8], "2"]]
    assert float(rows[0][-2].rstrip("%")) < 10  # never w2's 30% shown as noise
    pooled = across_processes(data.results)  # one machine's view (no names): the old grouping, by case only
    assert [r[:2] for r in pooled] == [[K1, "3"], [K2, "2"]] and float(pooled[0][-2].rstrip("%")) > 20
