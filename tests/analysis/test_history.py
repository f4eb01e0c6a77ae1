"""History and the machine matrix on seeded synthetic stores: change points where a step was put and nowhere
else, the newest run's check and the gate, machines never merged, a software change kept on its machine's
timeline and marked, thread counts never compared with each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.analysis.changepoints import detect
from dlperf.analysis.history import StudyHistory, build_history
from dlperf.cli.readers import result_environments
from dlperf.errors import DlperfError
from dlperf.hardware.identity import machine_id
from dlperf.report.history_report import history_json, history_sections
from dlperf.report.matrix import build_matrix, matrix_sections
from dlperf.report.sections import Figure, Table, render_markdown
from dlperf.store import Store
from tests.history_store import KEY, STUDY, add_run, environment, levels, series_store


def read(store: Store, study: str = STUDY, **kwargs: object) -> StudyHistory:
    """The history of `study` as the CLI reads it (every run, its environment and results)."""
    runs = store.runs_of_study(study)
    return build_history(study, runs, {r.id: store.run_environment(r.id) for r in runs},
                         {r.id: store.results(r.id) for r in runs}, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "hist.sqlite")


def test_a_30_percent_step_at_run_6_of_12_is_one_change_point_and_the_newest_run_regressed(store):
    series_store(store, levels(12, step_at=6, seed=3), seed=3)
    hist = read(store, fail_pct=10.0)
    (timeline,) = hist.timelines
    (case,) = timeline.cases
    assert case.detection is not None and case.detection.change_points == [6]  # index 6: the 7th run
    assert case.change_runs == [7]
    assert case.detection.effects[0] == pytest.approx(0.3, abs=0.03)
    # the newest run, in the slow segment, against the segment before the change
    assert case.newest.verdict == "slower" and case.newest.regression
    assert case.newest.baseline_runs == [1, 2, 3, 4, 5, 6]
    assert case.newest.ratio == pytest.approx(1.3, abs=0.03)
    assert [c.case_key for _, c in hist.failures()] == [KEY.format(1)]


def test_a_step_in_the_newest_run_is_found_at_once_and_fails_the_gate(store):
    series_store(store, levels(12, step_at=11, seed=4), seed=4)
    case = read(store, fail_pct=10.0).timelines[0].cases[0]
    assert case.change_runs == [12]
    assert case.newest.regression and case.newest.baseline_runs == list(range(1, 12))
    # at a threshold beyond the step, the same run passes
    assert not read(store, fail_pct=40.0).failures()


@pytest.mark.parametrize("seed", range(6))
def test_a_flat_noisy_series_has_no_change_point_and_passes_the_gate(store, seed):
    series_store(store, levels(12, seed=seed, run_sigma=0.02), seed=seed)
    case = read(store, fail_pct=10.0).timelines[0].cases[0]
    assert case.change_runs == [] and case.detection is not None and case.detection.change_points == []
    assert case.newest.verdict == "no change" and not case.newest.regression


@pytest.mark.parametrize("seed", [9, 22])
def test_the_spread_between_runs_keeps_a_flat_series_from_failing_the_gate(store, seed):
    """A flat series whose runs spread by 6% (lognormal), each run's own interval only its samples' (~1%): in
    these two the newest run lands over 10% above its baseline with its interval clear of the baseline's, which
    the check called `slower` (a false alarm) before the spread between the baseline runs was allowed for."""
    series_store(store, levels(12, seed=seed, run_sigma=0.06), seed=seed)
    case = read(store, fail_pct=10.0).timelines[0].cases[0]
    newest = case.points[-1]
    assert case.newest.ratio > 1.1 and newest.ci_low_s > case.newest.baseline_high_s  # the old check's `slower`
    assert case.newest.verdict == "inconclusive" and not case.newest.regression
    assert f"run-to-run spread of the {len(case.newest.baseline_runs)} baseline runs x1." in case.newest.reason


def test_two_baseline_runs_estimate_no_spread_and_a_step_still_fails_the_gate(store):
    """Over 2 runs the prediction interval (t = 12.7) would hold a 10% gate off a 37% slowdown: their spread is
    not estimated, the reason says so, and a 30% step in the third run fails the gate."""
    series_store(store, levels(3, step_at=2, seed=4), seed=4)
    case = read(store, fail_pct=10.0).timelines[0].cases[0]
    assert case.newest.baseline_runs == [1, 2] and case.newest.regression
    assert case.newest.reason.endswith("run-to-run spread not estimated (2 baseline runs, under 3)")


def test_an_improvement_is_a_change_point_but_not_a_regression(store):
    series_store(store, levels(10, step_at=5, step=0.7, seed=5), seed=5)
    case = read(store, fail_pct=5.0).timelines[0].cases[0]
    assert case.change_runs == [6] and case.newest.verdict == "faster" and not case.newest.regression


def test_a_step_below_the_minimum_effect_is_no_change_point():
    """PELT sees a 3% step in quiet data; the minimum effect (5%) drops it, a 2% minimum keeps it."""
    values = [1e-3 * (1.03 if i >= 6 else 1.0) * (1 + 0.0005 * (-1) ** i) for i in range(12)]
    quiet = [0.0005] * 12
    assert detect(values, quiet).change_points == [] and detect(values, quiet).dropped == [6]
    assert detect(values, quiet, min_effect=0.02).change_points == [6]


def test_a_one_run_excursion_in_the_middle_is_not_a_change():
    values = [1e-3] * 5 + [1.4e-3] + [1e-3] * 6
    assert detect(values, [0.001] * 12).change_points == []
    assert detect(values[:6], [0.001] * 6).change_points == [5]  # the same run as the newest: a change


def test_two_machines_are_two_timelines_and_two_matrix_columns(store):
    series_store(store, levels(4, seed=1), machine="m1", seed=1)
    series_store(store, levels(4, base=3e-3, seed=2), machine="m2", seed=2, start=10)
    add_run(store, 20, {KEY.format(2): 5e-3}, seed=9, machine="m2")  # a case m1 never ran
    hist = read(store)
    ids = {machine_id(environment("m1")), machine_id(environment("m2"))}
    assert {t.machine_id for t in hist.timelines} == ids and len(hist.timelines) == 2
    by_id = {t.machine_id: t for t in hist.timelines}
    m1, m2 = by_id[machine_id(environment("m1"))], by_id[machine_id(environment("m2"))]
    assert len(m1.runs) == 4 and len(m2.runs) == 5  # never merged
    assert all(p.median_s < 2e-3 for c in m1.cases for p in c.points if p.median_s)
    assert "Test CPU m1" in m1.label and "Test CPU m2" in m2.label
    # one machine only, by a prefix of its id
    assert [t.machine_id for t in read(store, machine=m2.machine_id[:6]).timelines] == [m2.machine_id]

    runs = store.runs_of_study(STUDY)
    results = {r.id: store.results(r.id) for r in runs}
    mat = build_matrix(STUDY, runs, {r.id: store.run_environment(r.id) for r in runs}, results,
                       result_environments(store, runs, (r for rs in results.values() for r in rs)))
    assert {c.machine_id for c in mat.columns} == ids
    assert mat.cells[(KEY.format(2), m1.machine_id)].status == "not run"
    (table,) = [s for s in matrix_sections(mat) if isinstance(s, Table)]
    assert len(table.header) == 3 and any("Test CPU m1" in h for h in table.header)
    row2 = next(r for r in table.rows if r[0] == KEY.format(2))
    assert "missing (not run)" in row2  # the newest complete run of m2 is run 20, m1 never ran the case
    text = render_markdown(matrix_sections(mat))
    assert "host-m1" in text and "host-m2" in text  # each machine's identity written out


def test_a_framework_upgrade_stays_on_one_timeline_and_is_marked(store):
    series_store(store, levels(4, seed=6), seed=6, numpy="1.26.4")
    series_store(store, levels(4, seed=7), seed=7, numpy="2.0.0", start=4)
    hist = read(store)
    (timeline,) = hist.timelines
    assert len(timeline.runs) == 8 and len(timeline.cases) == 1
    assert [r.changes for r in timeline.runs if r.changes] == [[("numpy", "1.26.4", "2.0.0")]]
    assert timeline.runs[4].number == 5
    runs_table = next(s for s in history_sections(hist) if isinstance(s, Table) and s.title.startswith("runs"))
    assert runs_table.rows[4][-1] == "numpy 1.26.4 -> 2.0.0"
    assert history_json(hist)["timelines"][0]["runs"][4]["changes"] == [
        {"field": "numpy", "old": "1.26.4", "new": "2.0.0"}]


def test_different_thread_counts_are_separate_series(store):
    series_store(store, levels(3, seed=8), seed=8, threads=1)
    series_store(store, levels(3, base=0.5e-3, seed=9), seed=9, threads=2, start=3)
    (timeline,) = read(store, fail_pct=10.0).timelines
    assert [c.case_key for c in timeline.cases] == [f"{KEY.format(1)} [threads=1]", f"{KEY.format(1)} [threads=2]"]
    assert all(c.change_runs == [] for c in timeline.cases)  # 2 threads twice as fast: not a change point
    assert timeline.cases[0].newest.verdict == "not in newest run"


def test_a_contended_newest_run_cannot_be_checked_and_the_gate_fails_closed(store):
    series_store(store, levels(5, seed=10), seed=10)
    add_run(store, 5, {KEY.format(1): 1e-3}, seed=11, validity="contended")
    case = read(store, fail_pct=10.0).timelines[0].cases[0]
    assert case.newest.verdict == "could not check" and case.newest.regression
    assert not case.points[-1].usable and case.points[-1].validity == "contended"
    assert read(store).failures() == []  # without the gate nothing fails


def test_a_failed_case_and_an_interrupted_run_are_shown_not_used(store):
    series_store(store, levels(4, seed=12), seed=12)
    add_run(store, 4, {KEY.format(1): "timeout"}, seed=13, status="interrupted")
    (timeline,) = read(store, fail_pct=10.0).timelines
    assert timeline.runs[-1].status == "interrupted"
    case = timeline.cases[0]
    assert case.points[-1].status == "timeout" and case.points[-1].median_s is None
    assert case.newest.verdict == "could not check"


def test_unknown_machine_or_case_is_one_line(store):
    series_store(store, levels(2, seed=14), seed=14)
    with pytest.raises(DlperfError, match="matches no machine"):
        read(store, machine="zzz")
    with pytest.raises(DlperfError, match="no case of study"):
        read(store, case_filter="no-such-case")
    with pytest.raises(DlperfError, match="no runs of study"):
        read(store, study="other")


def test_history_figures_are_written(store, tmp_path):
    for i, (a, b) in enumerate(zip(levels(12, step_at=6, seed=15), levels(12, seed=16), strict=True)):
        add_run(store, i, {KEY.format(1): a, KEY.format(2): b}, seed=i)
    figures = [s for s in history_sections(read(store), plot_dir=tmp_path / "plots") if isinstance(s, Figure)]
    assert len(figures) == 1  # both cases are ops/numpy/cpu: one group
    assert sorted(p.suffix for p in figures[0].paths) == [".png", ".svg"]
    assert all(p.is_file() and p.stat().st_size > 1000 for p in figures[0].paths)
