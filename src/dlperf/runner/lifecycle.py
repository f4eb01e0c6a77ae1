"""One run's life in the store, shared by `dlperf run` (sweep) and `dlperf maxbatch`.

`open_run` creates the run (or takes up one being resumed) and marks it running; when its block
ends it marks the run as the block said (`complete` unless set otherwise), or `interrupted` on
Ctrl-C / SIGTERM. Cases stored inside the block are committed one by one, so an interrupted run
keeps every finished case.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from dlperf import __version__
from dlperf.core.status import RunStatus
from dlperf.errors import DlperfError
from dlperf.store import Store


class SweepInterrupted(DlperfError):
    """The sweep was stopped (Ctrl-C / SIGTERM); finished cases are stored."""

    exit_code = 130


@dataclass(frozen=True)
class NewRun:
    """What a new run is stored with (the fields of `Store.create_run` but the version)."""

    study: str
    variant: str
    study_hash: str
    study_path: str
    filters: dict[str, Any]
    settings: dict[str, Any]  # the stored JSON form (RunSettings.stored())
    env_id: int
    n_cases: int
    #: The environment's derived figures (peaks, overrides, commit): stored with the run, not hashed.
    derived: dict[str, Any] | None = None


@dataclass
class OpenRun:
    """The run a block works in; `status` is what it ends as if the block finishes."""

    run_id: str
    resumed: bool
    status: RunStatus = "complete"


@contextlib.contextmanager
def open_run(store: Store, new: NewRun, *, resume_id: str | None = None,
             interrupted: Callable[[str], str] | None = None) -> Iterator[OpenRun]:
    """Create the run `new` describes (or take up `resume_id`), mark it running, and mark how it ended.

    On KeyboardInterrupt the run is marked `interrupted`; with `interrupted` given, the interrupt becomes
    a SweepInterrupted whose message is `interrupted(run_id)`, else it propagates as it is.
    """
    run_id = resume_id or store.create_run(**asdict(new), dlperf_version=__version__)
    store.set_run_status(run_id, "running")
    run = OpenRun(run_id, resumed=resume_id is not None)
    try:
        yield run
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted")
        if interrupted is None:
            raise
        raise SweepInterrupted(interrupted(run_id)) from None
    store.set_run_status(run_id, run.status)
