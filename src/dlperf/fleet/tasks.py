"""What runs on a Dask worker of the fleet: one case, stored there with that machine's environment.

A task (`run_fleet_case`) runs its case exactly as a local sweep does (`runner.sweep.run_case`: a fresh, isolated
dlperf worker process with its time-out), fingerprints the machine it runs on (once per worker and run, cached in
the worker's `FleetState` plugin), and stores the row itself under the run's lease, so a result lands once even
when Dask runs a task again after a worker died (the store refuses a second row for a case; a task first looks
whether its case is already stored). The client gets back a summary and the row, for its progress lines. As in a
local sweep, the canary (`runner.canary`) is timed just before and just after the case's process, on the machine
that ran it (named in each time), so the run's drift and a case's local machine speed are seen on a fleet too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from dlperf import __version__
from dlperf.core.result import CaseResult, Metrics
from dlperf.core.settings import RunSettings
from dlperf.errors import DlperfError, LeaseLostError
from dlperf.runner.canary import Canary, CanaryTime
from dlperf.studies import Case

if TYPE_CHECKING:
    from dlperf.store import Store

#: The name the fleet's state is registered under on a Dask worker (`dlperf fleet worker` preloads it).
PLUGIN_NAME = "dlperf-fleet"
#: How often a running case checks that its run still holds its lease (a client stopped: the case is ended).
LEASE_POLL_S = 2.0
#: Tries of a store call that fails with OperationalError (the store briefly unreachable), and the first pause.
STORE_TRIES = 4
STORE_PAUSE_S = 1.0

T = TypeVar("T")


class FleetError(DlperfError):
    """The fleet cannot run the study: the scheduler, a worker or the store as a worker sees it."""


@dataclass(frozen=True)
class FleetCase:
    """One case as sent to a worker: what to run, under which run and lease, into which store."""

    case: Case
    settings: RunSettings
    run_id: str
    lease_token: str
    store_url: str
    frameworks: tuple[str, ...]  # the run's: each machine's environment is fingerprinted with them all
    counters: bool = False
    wait_idle_s: float | None = None
    dlperf_version: str = __version__


class FleetState:
    """A worker's caches: its store connections and its environment ids (a fingerprint costs seconds).

    A Dask WorkerPlugin in duck type (setup/teardown), so this module needs no Dask import."""

    def __init__(self) -> None:
        self._stores: dict[str, Store] = {}
        self._fingerprints: dict[tuple[tuple[str, ...], int | None], dict[str, Any]] = {}
        self._env_ids: dict[tuple[str, tuple[str, ...], int | None], int] = {}
        self._threads: dict[str, int] = {}  # run id -> the threads this machine chose for it
        self._canary: Canary | None = None  # its buffers made at the first case
        self._lock = threading.Lock()
        self._canary_lock = threading.Lock()  # one canary at a time on this worker (tasks may run side by side)

    def setup(self, worker: Any) -> None:  # WorkerPlugin hook
        """Nothing to prepare: the caches fill on first use."""

    def teardown(self, worker: Any) -> None:  # WorkerPlugin hook
        for store in self._stores.values():
            store.engine.dispose()

    def store(self, url: str) -> Store:
        """The store at `url`, opened once; a SQLite file this machine cannot see is an error, never created."""
        from dlperf.store import Store
        from dlperf.store.urls import sqlite_path

        with self._lock:
            if url not in self._stores:
                path = sqlite_path(url)
                if path is not None and str(path) != ":memory:" and not path.is_file():
                    raise FleetError(f"the store {path} is not on the file system of {socket.gethostname()}: a "
                                     f"fleet needs a store every worker reaches (a PostgreSQL URL)")
                try:
                    self._stores[url] = Store(url)
                except DlperfError as exc:
                    raise FleetError(f"{socket.gethostname()} cannot open the store: {exc}") from None
            return self._stores[url]

    def threads(self, run_id: str) -> int:
        """The threads this machine uses for run `run_id` when the run does not set them: its physical cores
        that other processes leave idle (`runner.threads.idle_threads`), chosen at its first case of the run and
        kept for the others while this worker lives."""
        from dlperf.hardware.probe import default_threads
        from dlperf.meters.activity import busy_cores_now
        from dlperf.runner.threads import BUSY_PROBE_S, idle_threads

        with self._lock:
            if run_id not in self._threads:
                self._threads[run_id] = idle_threads(default_threads(), busy_cores_now(BUSY_PROBE_S))
            return self._threads[run_id]

    def canary(self) -> CanaryTime:
        """The canary timed once now, on this machine, outside any case's process."""
        with self._canary_lock:
            if self._canary is None:
                self._canary = Canary()
            return self._canary.measure(host=socket.gethostname())

    def env_id(self, store: Any, frameworks: tuple[str, ...], threads: int | None) -> int:
        """This machine's environment in `store` (fingerprinted here, in a worker process, once per frameworks
        and threads while this worker lives: a machine changed under a live worker is not seen)."""
        from dlperf.hardware.identity import identity_hash
        from dlperf.runner.sweep import collect_fingerprint

        key = (store.url, frameworks, threads)
        with self._lock:
            if key not in self._env_ids:
                fp = self._fingerprints.get(key[1:])
                if fp is None:
                    fp = self._fingerprints[key[1:]] = collect_fingerprint(list(frameworks), threads or 1)
                self._env_ids[key] = store.environment_id(fp, identity_hash(fp))
            return self._env_ids[key]


def fleet_state() -> tuple[Any, FleetState]:
    """The Dask worker running this task and its FleetState (a fresh one where the worker was started
    without `dlperf fleet worker`'s preload: then nothing is cached)."""
    from distributed import get_worker

    worker = get_worker()
    state = worker.plugins.get(PLUGIN_NAME)
    return worker, state if isinstance(state, FleetState) else FleetState()


class WorkerIdentity(TypedDict):
    """A Dask worker as dlperf names it: its Dask name, address and host."""

    worker: str
    address: str
    host: str


class FleetIdentity(WorkerIdentity):
    """metrics["fleet"] of a row a worker ran: the worker and the threads it ran the case with."""

    threads: int | None


class WorkerProbe(TypedDict, total=False):
    """A worker's answer to `probe_worker`: its identity and label, and whether it can run the sweep's cases: with
    the frameworks installed there, or the one-line error why not."""

    worker: str
    address: str
    host: str
    label: str | None
    ok: bool
    error: str
    frameworks: list[str]


class CaseDone(TypedDict):
    """`run_fleet_case`'s answer: whether it stored the row, or found it already stored, and on which worker."""

    stored: bool
    already: bool
    worker: str
    row: CaseResult | None


def worker_identity(worker: Any) -> WorkerIdentity:
    """metrics["fleet"] of a row this worker ran: its Dask name, address and host."""
    return {"worker": str(worker.name), "address": str(worker.address), "host": socket.gethostname()}


def probe_worker(store_url: str, dlperf_version: str, dask_worker: Any = None) -> WorkerProbe:
    """Run on every worker before a sweep (`Client.run`, which passes `dask_worker`): can it run dlperf's cases
    into this store? {"ok": True, "frameworks": those installed here, ...identity} or {"ok": False, "error": one
    line}. The client sends a case only to workers that have its framework."""
    from dlperf.frameworks import REGISTRY, get_framework

    worker = dask_worker
    info: WorkerProbe = {**worker_identity(worker), "label": os.environ.get("DLPERF_MACHINE_LABEL")}
    if dlperf_version != __version__:
        return {**info, "ok": False, "error": f"it runs dlperf {__version__}, the client {dlperf_version}"}
    state = worker.plugins.get(PLUGIN_NAME)
    try:
        (state if isinstance(state, FleetState) else FleetState()).store(store_url).check_writable()
    except Exception as exc:
        return {**info, "ok": False, "error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    return {**info, "ok": True, "frameworks": sorted(n for n in REGISTRY if get_framework(n).available())}


def run_fleet_case(job: FleetCase) -> CaseDone:
    """Run and store one case on this machine; {"stored": bool, "already": bool, "worker": name, "row": row}."""
    from dlperf.runner.sweep import run_case
    from dlperf.runner.threads import with_wait
    from dlperf.store import leases

    worker, state = fleet_state()
    if job.dlperf_version != __version__:
        raise FleetError(f"worker {worker.name} runs dlperf {__version__}, the client {job.dlperf_version}")
    store = state.store(job.store_url)
    case = job.case
    if retrying(store.has_result, job.run_id, case.key, case.repetition):  # sent again after a worker died: done
        return {"stored": False, "already": True, "worker": str(worker.name), "row": None}
    held = retrying(leases.current, store.engine, job.run_id)
    if held is None or held.token != job.lease_token:
        raise LeaseLostError(f"run {job.run_id} is no longer owned by the client that sent this case")
    settings = job.settings
    if settings.threads is None:  # the run did not set them: this machine's idle physical cores
        settings = settings.with_threads(state.threads(job.run_id))
    env_id = state.env_id(store, job.frameworks, settings.threads)
    waited = None
    if job.wait_idle_s:
        from dlperf.meters.activity import wait_idle

        waited = wait_idle(job.wait_idle_s)
    before = state.canary()
    with _ended_if_lease_lost(store, job.run_id, job.lease_token):
        row = run_case(case, settings, job.run_id, env_id, job.counters)
    after = state.canary()
    if waited is not None:
        row = with_wait(row, waited)
    if row.metrics is not None:  # a failed case has no metrics to hold it, as in a local sweep
        canary = {"before": before.as_dict(), "after": after.as_dict()}
        row = row.model_copy(update={"metrics": row.metrics.model_copy(update={"canary": canary})})
    row = with_fleet(row, {**worker_identity(worker), "threads": settings.threads})
    stored = retrying(store.add_result, row, lease_token=job.lease_token)  # LeaseLostError: taken over
    return {"stored": stored, "already": not stored, "worker": str(worker.name), "row": row}


def retrying(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)`, tried again (up to STORE_TRIES times, a growing pause between) where the store
    is briefly unreachable (a dropped connection, a restarting server: store.failures' DatabaseUnavailableError,
    or SQLAlchemy's OperationalError where that did not name it)."""
    from sqlalchemy.exc import OperationalError

    from dlperf.errors import DatabaseUnavailableError

    for attempt in range(1, STORE_TRIES + 1):
        try:
            return call(*args, **kwargs)
        except (OperationalError, DatabaseUnavailableError):
            if attempt == STORE_TRIES:
                raise
            time.sleep(STORE_PAUSE_S * attempt)
    raise AssertionError("unreachable")


def with_fleet(row: CaseResult, fleet: FleetIdentity) -> CaseResult:
    """The row with metrics["fleet"] (failed cases too: they get metrics for it)."""
    metrics = row.metrics or Metrics()
    return row.model_copy(update={"metrics": Metrics.model_validate(metrics.model_dump() | {"fleet": fleet})})


@contextlib.contextmanager
def _ended_if_lease_lost(store: Any, run_id: str, token: str) -> Iterator[None]:
    """While the block runs a case, end its dlperf worker processes (this process's children) as soon as the
    run's lease is no longer `token`'s: the client was stopped (Ctrl-C) or the run taken over, and Dask cannot
    interrupt a running task. The case then ends `crashed` and is not stored (its lease is gone)."""
    from dlperf.store import leases

    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(LEASE_POLL_S):
            try:
                held = leases.current(store.engine, run_id)
            except Exception:  # a store briefly unreachable: look again
                continue
            if held is None or held.token != token:
                _kill_case_workers()
                return

    watcher = threading.Thread(target=watch, name=f"dlperf-fleet-lease-{run_id}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(timeout=LEASE_POLL_S + 5)


def _kill_case_workers() -> None:
    """SIGKILL the process groups of this process's dlperf case workers (`python -m dlperf.runner.worker`)."""
    import psutil

    for child in psutil.Process().children():
        try:
            if "dlperf.runner.worker" in " ".join(child.cmdline()):
                os.killpg(child.pid, signal.SIGKILL)  # each worker leads its own session (run_worker)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
