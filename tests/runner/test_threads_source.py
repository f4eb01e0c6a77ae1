"""A run records how its thread count came about (asked for, or chosen for it from the load), beside its
environment and never in it, so that `compare` can say why two runs' threads differ."""

from __future__ import annotations

from pathlib import Path

from dlperf.hardware.identity import IDENTITY_KEYS
from dlperf.runner.events import RunEvents
from dlperf.runner.sweep import run_study
from dlperf.runner.threads import SOURCE_KEY, stored_source
from dlperf.store import Store
from dlperf.studies import load_study
from tests.factories import run_row

STUDY = ("name: threads_src\nworkload: faults\nframeworks: [numpy]\ndevices: [cpu]\nparams: {mode: ok}\n"
         "budget_s: 0.05\nmin_run_time_s: 0.01\ntimeout_s: 60\n")


class Told(RunEvents):
    def __init__(self) -> None:
        self.chosen: list[tuple[int, str]] = []

    def threads_chosen(self, threads: int, why: str) -> None:
        self.chosen.append((threads, why))


def test_each_way_of_setting_threads_is_recorded_with_the_run(tmp_path: Path) -> None:
    plain, pinned = tmp_path / "plain.yaml", tmp_path / "pinned.yaml"
    plain.write_text(STUDY)
    pinned.write_text(STUDY.replace("threads_src", "threads_src_pinned") + "threads: 1\n")
    store = Store(tmp_path / "r.sqlite")

    told = Told()
    chosen = store.run(run_study(load_study(str(plain)), store, events=told).run_id)
    (threads, why), = told.chosen  # the line the run printed is the reason it stored
    assert chosen.derived[SOURCE_KEY] == {"chosen": True, "by": "load", "why": why}
    assert chosen.settings["threads"] == threads
    asked = store.run(run_study(load_study(str(plain)), store, new=True, overrides={"threads": 1}).run_id)
    assert asked.derived[SOURCE_KEY] == {"chosen": False, "by": "--threads", "why": "given on the command line"}
    study = store.run(run_study(load_study(str(pinned)), store).run_id)
    assert study.derived[SOURCE_KEY]["by"] == "study" and study.derived[SOURCE_KEY]["chosen"] is False
    for run in (chosen, asked, study):
        assert stored_source(run) == run.derived[SOURCE_KEY]
        # how the threads came about is the run's, never the environment's identity nor its stored data
        assert SOURCE_KEY not in IDENTITY_KEYS and SOURCE_KEY not in store.environment(run.env_id)


def test_a_run_stored_before_the_record_is_read_from_what_it_has() -> None:
    assert stored_source(run_row(derived={}, filters={"overrides": {"threads": 2}}, settings={"threads": 2}))[
        "by"] == "--threads"
    fleet = stored_source(run_row(derived=None, filters={"executor": "dask"}, settings={"threads": None}))
    assert fleet["by"] == "fleet workers" and fleet["chosen"] is True
    old = stored_source(run_row(derived={"peaks": 1}, filters={}, settings={"threads": 2}))
    assert old["chosen"] is None and old["by"] == "not recorded"
