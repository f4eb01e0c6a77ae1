"""The runner reports progress as events, data only: a sweep tells its listener each case as it is stored."""

from __future__ import annotations

from dlperf.core.result import CaseResult
from dlperf.runner.events import RunEvents
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.studies import load_study
from tests.conftest import STUDIES


class Recorder(RunEvents):
    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def run_opened(self, run_id: str, *, resumed: bool, n_cases: int, n_stored: int, what: str) -> None:
        self.seen.append(("opened", resumed, n_cases, n_stored, what))

    def case_done(self, index: int, total: int, result: CaseResult) -> None:
        self.seen.append(("case", index, total, result.status))


def test_a_sweep_reports_each_case_then_a_resume_reports_none(db_path) -> None:
    store, study = Store(db_path), load_study(str(STUDIES / "many_ok.yaml"))
    first = Recorder()
    summary = run_study(study, store, events=first)
    n = summary.n_cases
    assert first.seen[0] == ("opened", False, n, 0, f"study {study.name} ({study.variant})")
    assert first.seen[1:] == [("case", i, n, "ok") for i in range(1, n + 1)]
    again = Recorder()
    run_study(study, store, resume=summary.run_id, events=again)
    assert again.seen == [("opened", True, n, n, f"study {study.name} ({study.variant})")]
