"""The runner's events drawn on a rich console: a line per case or probe, and a progress bar with ETA on a
terminal (transient, so a finished sweep leaves only its lines)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dlperf.core.result import CaseResult
from dlperf.core.validity import validity_words
from dlperf.report.views import view
from dlperf.runner.events import RunEvents
from dlperf.units import NOT_MEASURED, format_mib

_STATUS_STYLE = {"ok": "green", "unsupported": "yellow"}


def short(reason: str | None, width: int = 90) -> str:
    """A failure reason cut to one readable line (allocator messages are long)."""
    text = (reason or "").replace("[enforce fail at alloc_cpu.cpp:127] err == 0. ", "")
    return text if len(text) <= width else text[: width - 1] + "…"


class ConsoleEvents(RunEvents):
    """Prints what the runner reports on `console`."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Any = None
        self._task: Any = None
        self._axis, self._sample = "batch", "image"  # a maxbatch search's, named when it opens
        self._states: dict[str, dict[Any, Any]] = {}  # each workload view's state for this sweep (report.views)

    def run_opened(self, run_id: str, *, resumed: bool, n_cases: int, n_stored: int, what: str) -> None:
        if resumed:
            self.console.print(f"resuming run [bold]{run_id}[/]: {n_stored} of {n_cases} cases already stored")
        else:
            self.console.print(f"run [bold]{run_id}[/]: {n_cases} cases of {escape(what)}")

    def run_taken_over(self, run_id: str, why: str) -> None:
        self.console.print(escape(why), highlight=False)

    def threads_chosen(self, threads: int, why: str) -> None:
        self.console.print(escape(f"threads: {threads} ({why})"), highlight=False)

    def waiting(self, max_wait_s: float) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=f"waiting for idle CPU (max {max_wait_s:g} s)")

    @contextlib.contextmanager
    def cases(self, total: int, done: int) -> Iterator[None]:
        if not self.console.is_terminal:
            yield
            return
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            self._progress, self._task = progress, progress.add_task("cases", total=total, completed=done)
            try:
                yield
            finally:
                self._progress = self._task = None

    def case_started(self, index: int, total: int, key: str) -> None:
        if self._progress is not None:  # on a terminal: the bar names the case running (no line: logs stay one a case)
            self._progress.update(self._task, description=escape(short(f"[{index}/{total}] {key}", 70)))

    def case_done(self, index: int, total: int, result: CaseResult) -> None:
        status = result.status
        rep = f" #{result.repetition}" if result.repetition else ""
        shown = view(result.workload)
        detail = shown.progress(result, self._states.setdefault(result.workload, {})) if status == "ok" else \
            result.reason or ""
        if status == "ok" and shown.says_validity and result.m.validity not in (None, "valid"):
            detail += f" - {validity_words(result.m.validity, result.m.validity_reason)}"
        line = (f"{escape(f'[{index}/{total}] {result.case_key}{rep}:')} [{_STATUS_STYLE.get(status, 'red')}]"
                f"{status}[/] {escape(detail)}")
        console = self._progress.console if self._progress is not None else self.console
        console.print(line, highlight=False)
        if self._progress is not None:
            self._progress.update(self._task, description="cases")
            self._progress.advance(self._task)

    def search_opened(self, run_id: str, *, model: str, framework: str, device: str,
                      mem_limit_mb: int | None, axis: str = "batch", sample: str = "image") -> None:
        self._axis, self._sample = axis, sample
        limit = f", memory cap {mem_limit_mb} MiB per worker" if mem_limit_mb else ""
        self.console.print(f"run [bold]{run_id}[/]: largest {escape(axis)} of {escape(model)} on {framework} "
                           f"{device}{escape(limit)}")

    def probe_done(self, batch: int, result: CaseResult) -> None:
        peak, _ = result.peak_memory()
        mem = f"peak {format_mib(peak or None, missing=NOT_MEASURED)}"
        detail = (f"{mem}, {result.m.time_per_sample_s:.3g} s/{self._sample}" if result.ok
                  else f"{mem}; {short(result.reason)}")
        colour = "green" if result.ok else "red"
        self.console.print(f"  {escape(self._axis)} {batch:>6}: [{colour}]{result.status}[/] {escape(detail)}",
                           highlight=False)

    def note(self, text: str) -> None:
        console = self._progress.console if self._progress is not None else self.console
        console.print(escape(text), highlight=False)
