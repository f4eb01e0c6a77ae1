"""One run's life in the store, shared by `dlperf run` (sweep) and `dlperf maxbatch`.

`open_run` creates the run (or takes up one being resumed) and marks it running; when its block
ends it marks the run as the block said (`complete` unless set otherwise), or `interrupted` on
Ctrl-C / SIGTERM. Cases stored inside the block are committed one by one, so an interrupted run
keeps every finished case.

A run being executed is owned: its lease (`store.leases`) names this process, a thread refreshes its
heartbeat, and it is given back however the block ends. A new run is created with its lease in one
transaction. A run to resume whose lease another live process holds is refused (`RunBusyError`); one
whose owner is provably gone (the same host and its PID dead or reused, or a heartbeat older than
`lease_stale_s()`) is taken over, and the taker says so.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from dlperf import __version__
from dlperf.core.result import CaseResult
from dlperf.core.status import RunStatus
from dlperf.errors import DlperfError, InfrastructureError, LeaseLostError, RunBusyError
from dlperf.store import Store, leases

#: A lease whose heartbeat is older than this (seconds) is stale: its owner is taken to be gone.
LEASE_STALE_S = 120.0
#: How often the owner refreshes its heartbeat (at most; a quarter of the stale limit where that is less).
HEARTBEAT_S = 10.0
#: What `dlperf runs` and `show` call a run left `running` by an owner that is gone.
OWNER_GONE = "interrupted (owner gone)"


class SweepInterrupted(DlperfError):
    """The sweep was stopped (Ctrl-C / SIGTERM); finished cases are stored."""

    exit_code = 130


def lease_stale_s() -> float:
    """The stale limit of a lease's heartbeat: $DLPERF_LEASE_STALE_S (a finite number > 0), else 120 s."""
    from dlperf.hardware.peaks import env_number

    value = env_number("DLPERF_LEASE_STALE_S")
    return LEASE_STALE_S if value is None else value


#: Studies whose runs are searches (`dlperf maxbatch`): their case count is not known beforehand (stored as 0)
#: and a search is never resumed: one stopped half-way is run again.
SEARCH_STUDIES = frozenset({"maxbatch"})
#: What `runs` and `show` call a search left `running` by an owner that is gone, and what to do.
SEARCH_OWNER_GONE = "interrupted (owner gone; a search is not resumed: run it again)"


def shown_status(status: str, lease: leases.Lease | None, stale_s: float | None = None, *,
                 study: str | None = None) -> str:
    """A run's status as `runs` and `show` print it: a `running` run whose owner is gone (no lease, as runs
    of older versions have, or a lease whose owner is provably gone) is `interrupted (owner gone)`; a
    search's (`study` in SEARCH_STUDIES) says that nothing resumes it."""
    if status != "running":
        return status
    if lease is None or lease.gone_reason(lease_stale_s() if stale_s is None else stale_s) is not None:
        return SEARCH_OWNER_GONE if study in SEARCH_STUDIES else OWNER_GONE
    return status


def shown_cases(study: str, n_done: int, n_cases: int) -> str:
    """A run's `cases` column: stored of planned; a search's (no count beforehand) its probes stored."""
    return f"{n_done} (search)" if study in SEARCH_STUDIES else f"{n_done}/{n_cases}"


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


class _Heartbeat(threading.Thread):
    """Refreshes the lease's heartbeat every `interval_s` until stopped; notes when the lease is lost."""

    def __init__(self, store: Store, run_id: str, token: str, interval_s: float) -> None:
        super().__init__(name=f"dlperf-lease-{run_id}", daemon=True)
        self.store, self.run_id, self.token, self.interval_s = store, run_id, token, interval_s
        self.lost = False
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            try:
                if not leases.heartbeat(self.store.engine, self.run_id, self.token):
                    self.lost = True
                    return
            except Exception:  # a busy or briefly unreachable store: the next beat tries again
                continue

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


@dataclass
class OpenRun:
    """The run a block works in; `status` is what it ends as if the block finishes."""

    run_id: str
    resumed: bool
    status: RunStatus = "complete"
    #: Why the run was taken over from a former owner (None: it was free, or new).
    took_over: str | None = None
    store: Store | None = field(default=None, repr=False)
    lease_token: str | None = field(default=None, repr=False)
    _beat: _Heartbeat | None = field(default=None, repr=False)

    def check_lease(self) -> None:
        """LeaseLostError where the heartbeat found the lease taken over by another process."""
        if self._beat is not None and self._beat.lost and self.store is not None:
            raise LeaseLostError(f"run {self.run_id} was taken over by another process (see 'dlperf runs'): "
                                 f"this process stops here and stores nothing more")

    def store_result(self, row: CaseResult) -> bool:
        """Store one case's result, only while this process holds the run's lease (LeaseLostError else);
        False if the case was already stored."""
        assert self.store is not None
        self.check_lease()
        return self.store.add_result(row, lease_token=self.lease_token)


def claim(store: Store, run_id: str, owner: leases.Owner, token: str, stale_s: float) -> str | None:
    """Take the lease of `run_id` for `owner`: None where it was free; the reason where it was taken over
    from a gone owner; RunBusyError (one line naming the owner) where a live owner holds it."""
    for _ in range(5):
        held = leases.acquire(store.engine, run_id, owner, token)
        if held is None:
            return None
        why = held.gone_reason(stale_s)
        if why is None:
            raise RunBusyError(
                f"run {run_id} is being executed by {held.describe()}: wait for it to finish, or start a "
                f"separate run with --new (it is taken over once that process is gone, or silent for "
                f"{stale_s:g} s: DLPERF_LEASE_STALE_S)")
        if leases.take_over(store.engine, held, owner, token):
            return f"taking over run {run_id} from pid {held.owner.pid} on {held.owner.host}: {why}"
    raise RunBusyError(f"run {run_id}: other processes keep taking its lease; try again, or start a separate "
                       f"run with --new")


@contextlib.contextmanager
def open_run(store: Store, new: NewRun, *, resume_id: str | None = None,
             interrupted: Callable[[str], str] | None = None,
             on_takeover: Callable[[str, str], None] | None = None) -> Iterator[OpenRun]:
    """Create the run `new` describes (or take up `resume_id`), own it, mark it running, and mark how it ended.

    On KeyboardInterrupt the run is marked `interrupted`; with `interrupted` given, the interrupt becomes
    a SweepInterrupted whose message is `interrupted(run_id)`, else it propagates as it is. A run resumed
    from an owner that is gone calls `on_takeover(run_id, why)`. On LeaseLostError (another process took
    the run over) its status is left to its new owner. The lease is given back on every way out.
    """
    stale_s = lease_stale_s()
    owner, token = leases.Owner.me(), leases.new_token()
    took_over = None
    if resume_id is None:
        run_id = store.create_run(**asdict(new), dlperf_version=__version__, lease=(owner, token))
    else:
        run_id = resume_id
        took_over = claim(store, run_id, owner, token, stale_s)
    try:
        if took_over is not None and on_takeover is not None:
            on_takeover(run_id, took_over)
        if resume_id is not None:
            store.set_run_status(run_id, "running", lease_token=token)
        beat = _Heartbeat(store, run_id, token, min(HEARTBEAT_S, stale_s / 4))
        beat.start()
        run = OpenRun(run_id, resumed=resume_id is not None, took_over=took_over, store=store,
                      lease_token=token, _beat=beat)
        try:
            yield run
        except KeyboardInterrupt:
            store.set_run_status(run_id, "interrupted", lease_token=token)  # not if another process owns it now
            if interrupted is None:
                raise
            raise SweepInterrupted(interrupted(run_id)) from None
        except LeaseLostError:
            raise  # the run is its new owner's: its status too
        except InfrastructureError:
            # the store itself failed (unreachable, full): marking the run may fail too, and must not hide why;
            # a run left `running` by a process that is gone is resumed all the same (its owner is gone)
            with contextlib.suppress(InfrastructureError):
                store.set_run_status(run_id, "interrupted", lease_token=token)
            raise
        except BaseException:
            store.set_run_status(run_id, "interrupted", lease_token=token)  # a crash of this process: resumable
            raise
        finally:
            beat.stop()
        store.set_run_status(run_id, run.status, lease_token=token)
    except BaseException:  # the lease is given back on every way out; a store failing then hides nothing
        with contextlib.suppress(InfrastructureError):
            leases.release(store.engine, run_id, token)
        raise
    leases.release(store.engine, run_id, token)
