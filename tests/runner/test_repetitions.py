"""Repetitions run interleaved in fresh workers (A B C A B C); the run table shows their spread; the thread default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlperf.report.tables import across_processes, render_markdown
from dlperf.runner.sweep import run_study
from dlperf.runner.threads import choose_threads, idle_threads
from dlperf.store import Store
from dlperf.studies import load_study

#: Two trivial timed cases of the faults workload: the order of the repetitions and the table of their spread are
#: the runner's and the report's whatever the workload (an ops study also measured the ceilings first).
STUDY = """\
name: reps
description: two tiny cases, three processes each
workload: faults
frameworks: [numpy]
params:
  mode: ok
  chunk_mb: [1, 2]
repetitions: 3
budget_s: 0.1
min_run_time_s: 0.05
timeout_s: 60
energy: false
"""


@pytest.fixture(scope="module")
def reps_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str]:
    """One run of the study, made once for the tests that read it (none writes to its store)."""
    folder = tmp_path_factory.mktemp("reps")
    path = folder / "reps.yaml"
    path.write_text(STUDY)
    store = Store(folder / "r.sqlite")
    summary = run_study(load_study(str(path)), store, overrides={"threads": 1})
    return store, summary.run_id


def test_repetitions_are_interleaved_and_each_in_its_own_process(reps_run: tuple[Store, str]) -> None:
    store, run_id = reps_run
    rows = sorted(store.results(run_id), key=lambda r: r.started_at)
    order = [(r.params["chunk_mb"], r.repetition) for r in rows]
    assert order == [(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (2, 2)]
    assert all(r.ok for r in rows)


def test_the_run_table_shows_spread_within_and_across_processes(reps_run: tuple[Store, str]) -> None:
    store, run_id = reps_run
    results = store.results(run_id)
    table = across_processes(results)
    assert [row[0] for row in table] == sorted({r.case_key for r in results}, key=[r.case_key for r in results].index)
    assert all(row[1] == "3" for row in table)
    text = render_markdown(store.run(run_id), store.run_environment(run_id), results)
    assert "Repetitions in separate worker processes" in text and "spread across (max-min)" in text
    # A run of single repetitions has no such table.
    assert across_processes([r for r in results if r.repetition == 0]) == []


def test_idle_threads_leaves_the_busy_cores_alone() -> None:
    assert idle_threads(2, 0.0) == 2
    assert idle_threads(2, 0.2) == 2  # under the quarter core that validity tolerates
    assert idle_threads(2, 0.4) == 1  # over it: a core is given up, or every case would be contended
    assert idle_threads(2, 1.0) == 1
    assert idle_threads(2, 3.7) == 1  # at least one
    assert idle_threads(8, 2.6) == 5
    assert idle_threads(4, None) == 4  # unreadable: all cores


def test_an_unfinished_run_keeps_the_threads_it_started_with(tmp_path: Path) -> None:
    path = tmp_path / "reps.yaml"
    path.write_text(STUDY)
    study = load_study(str(path))
    store = Store(tmp_path / "r.sqlite")
    filters = {"frameworks": [], "devices": [], "overrides": {}}
    env_id = store.environment_id({"cpu_model": "test"}, "test-identity")
    run_id = store.create_run(study=study.name, variant=study.variant, study_hash=study.study_hash,
                              study_path=study.path, filters=filters, dlperf_version="test",
                              settings=study.settings.with_threads(7).stored(), env_id=env_id, n_cases=6)
    assert choose_threads(store, study, filters, resume=None, new=False) == (7, f"as the unfinished run {run_id} "
                                                                                 f"started with")
    threads, why = choose_threads(store, study, filters, resume=None, new=True)  # --new: chosen afresh
    assert threads != 7 and 1 <= threads <= (os.cpu_count() or 1) and "physical cores" in why
