"""What a sweep or a maxbatch search tells whoever watches it, as data; the runner draws nothing itself.

`RunEvents` is the listener interface; its methods do nothing, so library callers and tests that pass
none see no output. The CLI passes `cli.progress.ConsoleEvents`, which prints a line per case and a
progress bar with ETA on a terminal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dlperf.core.result import CaseResult


class RunEvents:
    """A listener for a run's progress. Override what you want to show; every method here is silent."""

    def run_opened(self, run_id: str, *, resumed: bool, n_cases: int, n_stored: int, what: str) -> None:
        """A run starts or resumes: `n_stored` of its `n_cases` are already stored; `what` names the study."""

    def run_taken_over(self, run_id: str, why: str) -> None:
        """The run to resume was taken over from an owner that is gone; `why` says whose and how it is known."""

    def threads_chosen(self, threads: int, why: str) -> None:
        """The run's CPU thread count was chosen by dlperf (not given with --threads), for this reason."""

    def waiting(self, max_wait_s: float) -> None:
        """The sweep waits (at most `max_wait_s`) for other processes to leave the CPU before a case."""

    @contextlib.contextmanager
    def cases(self, total: int, done: int) -> Iterator[None]:
        """The block in which the remaining cases run (a progress bar lives this long)."""
        yield

    def case_started(self, index: int, total: int, key: str) -> None:
        """Case number `index` of `total` (its key) starts in a worker (a long one is otherwise silent)."""

    def case_done(self, index: int, total: int, result: CaseResult) -> None:
        """Case number `index` of `total` ended and is stored."""

    def search_opened(self, run_id: str, *, model: str, framework: str, device: str,
                      mem_limit_mb: int | None, axis: str = "batch", sample: str = "image") -> None:
        """A maxbatch search of `model` (what it runs) starts in run `run_id`; it varies `axis`, and the
        step's samples are `sample`s (for the time per sample)."""

    def probe_done(self, batch: int, result: CaseResult) -> None:
        """One maxbatch probe (`batch`: the value of the axis searched) ended and is stored."""

    def note(self, text: str) -> None:
        """One line about where the cases run (a fleet's workers, a device no worker has, a worker lost)."""
