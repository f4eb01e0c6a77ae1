"""Machines past one: the machine label in a machine's identity (only where set: unlabelled machines keep their
ids), a run's results split by the machine that ran them, RUN@MACHINE picking one share (never pooling two
machines), and the machine matrix counting a fleet run for each machine in it (`tests.fleet_store`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.analysis.machines import MachineShare, pick_share, share_names
from dlperf.cli.readers import result_environments, run_shares
from dlperf.errors import DlperfError
from dlperf.hardware.identity import describe_machine, machine_id, machine_label, short_name
from dlperf.report.matrix import build_matrix, matrix_json, matrix_sections
from dlperf.report.sections import render_markdown
from dlperf.store import Store
from tests.fleet_store import K1, K2, M1, M2, M3, FleetStore, fleet_store
from tests.history_store import STUDY, environment


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Store, FleetStore]:
    store = Store(tmp_path / "fleet.sqlite")
    return store, fleet_store(store)


def test_an_unlabelled_machine_keeps_its_id_and_a_label_makes_another_machine():
    # pinned: the ids main gave these environments before the label existed (a changed id splits every timeline)
    assert machine_id(environment("m1")) == "0f5764301f54"
    assert machine_id(environment("m2")) == "23ceb686d236"
    assert machine_id(environment("m1") | {"machine_label": ""}) == "0f5764301f54"  # empty: not set
    labelled = environment("m1") | {"machine_label": "w1"}
    assert machine_id(labelled) != machine_id(environment("m1"))
    assert machine_label(labelled) == "w1: " + machine_label(environment("m1"))
    assert describe_machine(labelled).startswith("label w1, CPU Test CPU m1")
    assert short_name(labelled) == "w1" and short_name(environment("m1")) == "0f576430"


def test_a_fleet_runs_results_split_by_the_machine_that_ran_them(fleet):
    store, ids = fleet
    run, results, shares = run_shares(store, ids.fleet)
    assert len(results) == 4
    by_id = {s.machine_id: s for s in shares}
    assert set(by_id) == {machine_id(M1), machine_id(M2)}
    m1, m2 = by_id[machine_id(M1)], by_id[machine_id(M2)]
    assert sorted((r.case_key, r.repetition) for r in m1.results) == [(K1, 0), (K2, 1)]
    assert sorted((r.case_key, r.repetition) for r in m2.results) == [(K1, 1), (K2, 0)]
    assert m2.env["machine_label"] == "w2" and m2.name == "w2"
    assert m1.env["cpu_model"] == "Test CPU m1" and m1.env_ids == (run.env_id,)
    names = share_names(shares)
    assert names == {m1.env_ids[0]: m1.name, m2.env_ids[0]: "w2"}
    # a run on one machine: one share, and no machine column
    _, _, local = run_shares(store, ids.local)
    assert len(local) == 1 and len(local[0].results) == 2 and share_names(local) == {}


def test_pick_a_share_by_label_or_id_prefix_never_pooled(fleet):
    store, ids = fleet
    _, _, shares = run_shares(store, ids.fleet)
    assert pick_share(shares, "w2", ids.fleet).machine_id == machine_id(M2)
    assert pick_share(shares, machine_id(M1)[:5], ids.fleet).machine_id == machine_id(M1)
    with pytest.raises(DlperfError, match=rf"run {ids.fleet} ran on 2 machines .*{ids.fleet}@MACHINE") as exc:
        pick_share(shares, None, ids.fleet)
    assert machine_id(M1) in str(exc.value) and "w2:" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(DlperfError, match="'w9' matches no machine"):
        pick_share(shares, "w9", ids.fleet)
    with pytest.raises(DlperfError, match="no machine after '@'"):
        pick_share(shares, "", ids.fleet)


def test_an_ambiguous_id_prefix_or_label_is_refused():
    def share(mid: str, label: str, env_id: int) -> MachineShare:
        return MachineShare(mid, label, label, {"machine_label": label}, (env_id,), [])

    shares = [share("abc123", "a", 1), share("abd456", "b", 2), share("ffe789", "dup", 3), share("ffe000", "dup", 4)]
    assert pick_share(shares, "abc", "r").machine_id == "abc123"
    with pytest.raises(DlperfError, match="'ab' is ambiguous"):
        pick_share(shares, "ab", "r")
    with pytest.raises(DlperfError, match="'dup' is ambiguous"):
        pick_share(shares, "dup", "r")
    # two machines of one label get the id beside it in a run table's machine column
    assert sorted(share_names(shares[2:]).values()) == ["dup ffe000", "dup ffe789"]


def test_the_matrix_counts_a_fleet_run_for_each_of_its_machines(fleet):
    store, ids = fleet
    runs = store.runs_of_study(STUDY)
    results = {r.id: store.results(r.id) for r in runs}
    envs = {r.id: store.run_environment(r.id) for r in runs}
    mat = build_matrix(STUDY, runs, envs, results,
                       result_environments(store, runs, (r for rs in results.values() for r in rs)))
    cols = {c.machine_id: c for c in mat.columns}
    assert set(cols) == {machine_id(M1), machine_id(M2), machine_id(M3)}
    m1, m2, m3 = cols[machine_id(M1)], cols[machine_id(M2)], cols[machine_id(M3)]
    # the fleet run is newer than M1's local run: it decides M1's column too; the interrupted one decides nothing
    assert (m1.run_id, m2.run_id, m3.run_id) == (ids.fleet, ids.fleet, ids.bundle)
    assert (m1.run_machines, m2.run_machines, m3.run_machines) == (2, 2, 1)
    assert mat.incomplete == []
    for key, level_m1, level_m2 in ((K1, 1e-3, 1.3e-3), (K2, 2e-3, 2.6e-3)):
        a, b = mat.cells[(key, m1.machine_id)], mat.cells[(key, m2.machine_id)]
        assert a.processes == 1 and b.processes == 1  # each machine's own repetition, never the two pooled
        assert a.median_s == pytest.approx(level_m1, rel=0.03) and b.median_s == pytest.approx(level_m2, rel=0.03)
    assert mat.cells[(K2, m3.machine_id)].median_s == pytest.approx(9e-3, rel=0.03)
    assert m2.label.startswith("w2: ") and m3.label.startswith("jetson: ARMv8 Processor rev 1 (4 cores) / Orin")
    text = render_markdown(matrix_sections(mat))
    assert "label w2, CPU Test CPU m2" in text and "label jetson, CPU ARMv8 Processor rev 1" in text
    assert "aarch64" in text and "#0 Orin 16 GiB" in text
    assert text.count("a fleet run on 2 machines") == 2
    doc = matrix_json(mat)
    assert {m["run_machines"] for m in doc["machines"]} == {1, 2}


def test_a_machine_whose_newest_run_is_an_incomplete_fleet_run_is_named(tmp_path):
    from tests.fleet_store import add_rows_run

    store = Store(tmp_path / "s.sqlite")
    add_rows_run(store, 0, M1, [(K1, 0, M1, 1e-3)], seed=1)
    fleet = add_rows_run(store, 1, M1, [(K1, 0, M1, 1e-3), (K1, 1, M2, 1e-3)], seed=2, status="interrupted")
    runs = store.runs_of_study(STUDY)
    results = {r.id: store.results(r.id) for r in runs}
    mat = build_matrix(STUDY, runs, {r.id: store.run_environment(r.id) for r in runs}, results,
                       result_environments(store, runs, (r for rs in results.values() for r in rs)))
    assert [c.machine_id for c in mat.columns] == [machine_id(M1)]
    assert mat.incomplete == [(machine_id(M2), machine_label(M2), fleet, "interrupted")]
