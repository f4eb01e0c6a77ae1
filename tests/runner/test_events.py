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

    def case_started(self, index: int, total: int, key: str) -> None:
        self.seen.append(("started", index, total))

    def case_done(self, index: int, total: int, result: CaseResult) -> None:
        self.seen.append(("case", index, total, result.status))


def test_a_sweep_reports_each_case_then_a_resume_reports_none(db_path) -> None:
    store, study = Store(db_path), load_study(str(STUDIES / "many_ok.yaml"))
    first = Recorder()
    summary = run_study(study, store, events=first)
    n = summary.n_cases
    assert first.seen[0] == ("opened", False, n, 0, f"study {study.name} ({study.variant})")
    assert first.seen[1:] == [e for i in range(1, n + 1) for e in (("started", i, n), ("case", i, n, "ok"))]
    again = Recorder()
    run_study(study, store, resume=summary.run_id, events=again)
    assert again.seen == [("opened", True, n, n, f"study {study.name} ({study.variant})")]


def test_the_progress_bar_names_the_case_that_runs() -> None:
    """On a terminal the bar says which case is running (a long case is otherwise a bar that does not move)."""
    import io

    from rich.console import Console

    from dlperf.cli.progress import ConsoleEvents

    events = ConsoleEvents(Console(file=io.StringIO(), force_terminal=True, width=120))
    with events.cases(3, 1):
        events.case_started(2, 3, "model/torch/cpu/batch=8,source=m.py:net")
        (task,) = events._progress.tasks
        assert task.description == "[2/3] model/torch/cpu/batch=8,source=m.py:net"
