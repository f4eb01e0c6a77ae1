"""The client side of a fleet: `dlperf run STUDY --executor dask --scheduler ADDR` sends each case to a Dask worker.

This process still owns the run (`runner.sweep.run_study` creates or resumes it and holds its lease); the executor
only places cases. Each case becomes one Dask task (`tasks.run_fleet_case`) that asks for `machine=1` (one case per
machine at a time: every `dlperf fleet worker` advertises exactly one) and one unit of its device's kind (`cpu`,
`cuda`), so it lands on a machine that has that device. A worker that dies mid-case makes Dask run the task
again elsewhere (up to `distributed.scheduler.allowed-failures` deaths, then `KilledWorker`: the case is left
unstored and re-runnable). Cases whose device no live worker advertises are not sent (they would wait forever):
one line per device, nothing stored for them, and the run ends `interrupted`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from secrets import token_hex
from typing import Any

from dlperf import __version__
from dlperf.core.result import CaseResult
from dlperf.errors import LeaseLostError
from dlperf.fleet.tasks import FleetCase, FleetError, probe_worker, run_fleet_case
from dlperf.runner.executor import CaseBatch
from dlperf.studies import Case

#: Seconds to reach the scheduler (DLPERF_FLEET_CONNECT_S overrides).
CONNECT_S = 10.0
#: Seconds the cases of a device may wait with no live worker advertising it before they are given up.
NO_WORKER_S = 30.0
#: A future's states that end it ("lost": its result went with its worker; Dask computes it again).
ENDED = ("finished", "error", "cancelled")
#: How often the client looks at its cases and the workers.
POLL_S = 0.5


def device_kind(device: str) -> str:
    """The worker resource a case's device needs: 'cuda:1' -> 'cuda', 'cpu' -> 'cpu'."""
    return device.split(":", 1)[0]


def _setting(name: str, default: float) -> float:
    from dlperf.hardware.peaks import env_number

    value = env_number(name)
    return default if value is None else value


def shared_url(url: str) -> str:
    """The store URL as workers must see it: a SQLite path made absolute (their working folders differ)."""
    from dlperf.store.engines import sqlite_path

    path = sqlite_path(url)
    if path is None or str(path) == ":memory:" or path.is_absolute():
        return url
    return f"sqlite:///{Path(path).resolve()}"


class DaskExecutor:
    """Runs a sweep's cases on the workers of the Dask scheduler at `scheduler` (see the module's doc)."""

    name = "dask"

    def __init__(self, scheduler: str, store_url: str, *, warn: Callable[[str], None] | None = None) -> None:
        self.scheduler = scheduler
        self.store_url = shared_url(store_url)
        self._warn = warn or (lambda text: None)
        self.client: Any = None
        self.workers: dict[str, dict[str, Any]] = {}

    # -- connection ----------------------------------------------------------
    def connect(self) -> DaskExecutor:
        """Reach the scheduler and check every worker can run dlperf into the store: FleetError (one line) if
        not. Called before the run is created, so a bad address stores nothing."""
        from distributed import Client

        from dlperf.store.engines import sqlite_path

        timeout_s = _setting("DLPERF_FLEET_CONNECT_S", CONNECT_S)
        try:
            self.client = Client(self.scheduler, timeout=timeout_s, set_as_default=False)
        except Exception as exc:  # OSError (refused, timed out), ValueError (a malformed address)
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FleetError(f"cannot reach the Dask scheduler at {self.scheduler} within {timeout_s:g} s: {text} "
                             f"(start one with `dlperf fleet scheduler`; DLPERF_FLEET_CONNECT_S sets the wait)"
                             ) from None
        try:  # a worker started just now may still be joining
            self.client.wait_for_workers(1, timeout=timeout_s)
        except Exception:  # TimeoutError: said below
            pass
        self.workers = self._live_workers()
        if not self.workers:
            self.close()
            raise FleetError(f"the Dask scheduler at {self.scheduler} has no workers: start one per machine with "
                             f"`dlperf fleet worker --scheduler {self.scheduler}`")
        if sqlite_path(self.store_url) is not None:
            self._warn(f"the store is a SQLite file ({sqlite_path(self.store_url)}): every worker must see it at "
                       f"that path (workers on this machine, or a shared file system); a fleet of machines needs "
                       f"a PostgreSQL store (--db postgresql+psycopg://...)")
        try:
            probes = self.client.run(probe_worker, self.store_url, __version__)
        except Exception as exc:  # a worker without dlperf, or gone meanwhile
            self.close()
            raise FleetError(f"the workers of {self.scheduler} cannot run dlperf: {type(exc).__name__}: {exc}"
                             ) from None
        bad = [f"{p.get('worker', addr)} ({p['error']})" for addr, p in sorted(probes.items()) if not p.get("ok")]
        if bad:
            self.close()
            raise FleetError(f"{len(bad)} worker(s) of {self.scheduler} cannot run this study into "
                             f"{self._shown_url()}: {'; '.join(bad)}")
        return self

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _shown_url(self) -> str:
        from sqlalchemy import make_url

        return make_url(self.store_url).render_as_string(hide_password=True)

    def _live_workers(self) -> dict[str, dict[str, Any]]:
        """Address -> the scheduler's record (name, resources, host...) of each live worker."""
        # asked of the scheduler itself: Client.scheduler_info() returns a cache its periodic refresh may
        # replace meanwhile with one that lists no workers
        return dict(self.client.sync(self.client.scheduler.identity, n_workers=-1).get("workers", {}))

    def _kinds(self) -> set[str]:
        """The device kinds some live machine-worker advertises."""
        return {k for w in self.workers.values() if (w.get("resources") or {}).get("machine")
                for k, v in (w.get("resources") or {}).items() if k != "machine" and v}

    # -- the sweep -----------------------------------------------------------
    def run_cases(self, batch: CaseBatch) -> Iterator[CaseResult]:
        """Send every case of `batch` to the fleet and yield each stored row as it lands (see the module)."""
        if self.client is None:
            self.connect()
        events = batch.events
        events.note(f"fleet: {len(self.workers)} worker(s) at {self.scheduler}: " + ", ".join(
            f"{w.get('name')} ({', '.join(sorted(k for k in (w.get('resources') or {}) if k != 'machine'))}) on "
            f"{w.get('host')}" for w in self.workers.values()))
        sendable, missing = [], {}
        for case in batch.todo:
            kind = device_kind(case.device)
            if kind in self._kinds():
                sendable.append(case)
            else:
                missing[kind] = missing.get(kind, 0) + 1
        for kind, n in sorted(missing.items()):
            self._not_run(batch, f"{n} case(s) on {kind} not sent: no worker of {self.scheduler} advertises "
                                 f"{kind} (start `dlperf fleet worker` on a machine with it, then rerun)")
        pending = {self._submit(case, batch): case for case in sendable}
        try:
            yield from self._collect(pending, batch)
        finally:
            if pending and self.client is not None:  # Ctrl-C, a lost lease, an error: nothing more is run
                try:
                    self.client.cancel(list(pending), force=True)
                except Exception:  # the scheduler is gone already
                    pass

    def _submit(self, case: Case, batch: CaseBatch) -> Any:
        job = FleetCase(case=case, settings=batch.settings, run_id=batch.run.run_id,
                        lease_token=batch.run.lease_token or "", store_url=self.store_url,
                        frameworks=tuple(batch.frameworks), counters=batch.counters, wait_idle_s=batch.wait_idle_s)
        key = f"dlperf-{batch.run.run_id}-{case.key}#{case.repetition}-{token_hex(4)}"
        return self.client.submit(run_fleet_case, job, key=key, pure=False,
                                  resources={"machine": 1, device_kind(case.device): 1})

    def _not_run(self, batch: CaseBatch, line: str) -> None:
        batch.not_run.append(line)
        batch.events.note(line)

    def _collect(self, pending: dict[Any, Case], batch: CaseBatch) -> Iterator[CaseResult]:
        """Wait for the futures in `pending` (removing each as it ends), yielding the rows stored."""
        no_worker_s = _setting("DLPERF_FLEET_NO_WORKER_S", NO_WORKER_S)
        kinds_gone_since: dict[str, float] = {}
        next_look = time.monotonic()
        while pending:
            batch.run.check_lease()
            for future in [f for f in pending if f.status in ENDED]:
                case = pending.pop(future)
                row = self._ended(future, case, batch)
                if row is not None:
                    yield row
            if time.monotonic() >= next_look and pending:
                next_look = time.monotonic() + 2.0
                self._look_at_workers(pending, batch, kinds_gone_since, no_worker_s)
            if pending:
                time.sleep(POLL_S)

    def _ended(self, future: Any, case: Case, batch: CaseBatch) -> CaseResult | None:
        """The stored row of a finished future; None when there is none (already stored, or not run)."""
        from distributed.scheduler import KilledWorker

        if future.status == "finished":
            out = future.result()
            if out.get("already"):
                batch.events.note(f"{case.key} #{case.repetition}: already stored (a rerun on {out['worker']} after "
                                  f"a worker was lost); not stored again")
                return None
            return out["row"]
        if future.status == "cancelled" or self.client is None or self.client.status != "running":
            raise FleetError(f"lost the Dask scheduler at {self.scheduler}: the cases not yet stored stay "
                             f"re-runnable (rerun the same command)")
        exc = future.exception()
        if isinstance(exc, LeaseLostError):
            raise LeaseLostError(str(exc))
        if isinstance(exc, KilledWorker):
            self._not_run(batch, f"{case.key} #{case.repetition}: not stored: every worker that ran it died "
                                 f"(Dask's KilledWorker; distributed.scheduler.allowed-failures); it stays "
                                 f"re-runnable")
            return None
        raise FleetError(f"{case.key} #{case.repetition} failed on a worker: {type(exc).__name__}: {exc}")

    def _look_at_workers(self, pending: dict[Any, Case], batch: CaseBatch, gone_since: dict[str, float],
                         no_worker_s: float) -> None:
        """Say which workers left or joined; give up the cases of a device no worker has had for `no_worker_s`."""
        try:
            now_workers = self._live_workers()
        except Exception:  # the scheduler is unreachable: the futures say so
            return
        for addr in sorted(set(self.workers) - set(now_workers)):
            batch.events.note(f"fleet: worker {self.workers[addr].get('name')} ({addr}) is gone: its cases go to "
                              f"the other workers")
        for addr in sorted(set(now_workers) - set(self.workers)):
            batch.events.note(f"fleet: worker {now_workers[addr].get('name')} ({addr}) joined")
        self.workers = now_workers
        kinds, now = self._kinds(), time.monotonic()
        for kind in {device_kind(c.device) for c in pending.values()}:
            if kind in kinds:
                gone_since.pop(kind, None)
                continue
            since = gone_since.setdefault(kind, now)
            if now - since < no_worker_s:
                continue
            stuck = [f for f, c in pending.items() if device_kind(c.device) == kind]
            self.client.cancel(stuck, force=True)
            for f in stuck:
                del pending[f]
            self._not_run(batch, f"{len(stuck)} case(s) on {kind} not run: no worker advertising {kind} has been "
                                 f"left for {no_worker_s:g} s (DLPERF_FLEET_NO_WORKER_S); they stay re-runnable")
