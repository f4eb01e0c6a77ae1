"""The client side of a fleet: `dlperf run STUDY --executor dask --scheduler ADDR` sends each case to a Dask worker.

This process still owns the run (`runner.sweep.run_study` creates or resumes it and holds its lease); the executor
only places cases, and it places them itself: each live machine-worker that can run a case (its device, enough
GPUs, its framework installed: `placement`) gets at most one case at a time, submitted to that worker alone, and
the next when it ends. So no case ever waits in a worker's queue, and a worker that dies takes only the case it
was running: that case goes to another worker (a rerun first looks whether the dead one stored it), and is left
unstored, re-runnable, once every worker it was given to died (`distributed.scheduler.allowed-failures` + 1
times). A worker whose probe fails (another dlperf, a store it cannot reach), also one that joins later, or whose
task raises FleetError, is left out with one line, its case sent elsewhere. Cases no live worker can run are not
sent (at the start, or after DLPERF_FLEET_NO_WORKER_S without such a worker): one line per reason, nothing stored
for them, and the run ends `interrupted`.

Security: the scheduler is unauthenticated unless configured otherwise: whoever reaches it can run code on the
workers (keep it on a private network, or use Dask's TLS security settings), and the store URL, with any password
in it, is sent to every worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from secrets import token_hex
from typing import Any

from dlperf import __version__
from dlperf.core.result import CaseResult
from dlperf.errors import LeaseLostError, exception_line
from dlperf.fleet.placement import DaskWorker, device_kind, needs, offers, why_none
from dlperf.fleet.tasks import FleetCase, FleetError, probe_worker, run_fleet_case
from dlperf.runner.executor import CaseBatch
from dlperf.studies import Case

__all__ = ["DaskExecutor", "FleetError", "device_kind", "shared_url"]

#: Seconds to reach the scheduler (DLPERF_FLEET_CONNECT_S overrides).
CONNECT_S = 10.0
#: Seconds the cases no live worker can run may wait for one before they are given up.
NO_WORKER_S = 30.0
#: A future's states that end it.
ENDED = ("finished", "error", "cancelled")
#: How often the client looks at its cases and the workers.
POLL_S = 0.3


def _setting(name: str, default: float) -> float:
    from dlperf.hardware.peaks import env_number

    value = env_number(name)
    return default if value is None else value


def shared_url(url: str) -> str:
    """The store URL as workers must see it: a SQLite path made absolute (their working folders differ)."""
    from dlperf.store.urls import sqlite_path

    path = sqlite_path(url)
    if path is None or str(path) == ":memory:" or path.is_absolute():
        return url
    return f"sqlite:///{Path(path).resolve()}"


def check_address(address: str) -> None:
    """A scheduler address dlperf can use: tcp:// or tls://, a host and a port (FleetError, one line, if not)."""
    from distributed.comm import parse_address, parse_host_port

    hint = "give tcp://HOST:PORT (or tls://HOST:PORT), as `dlperf fleet scheduler` prints it"
    try:
        scheme, rest = parse_address(address, strict=True)
        if scheme not in ("tcp", "tls"):
            raise ValueError(f"scheme {scheme}")
        host, port = parse_host_port(rest)
    except (ValueError, TypeError):
        raise FleetError(f"--scheduler {address}: not a Dask scheduler address; {hint}") from None
    if not host or not port:
        raise FleetError(f"--scheduler {address}: no host or port; {hint}")


def quiet_distributed() -> None:
    """Dask's own loggers to CRITICAL in this client: a lost scheduler is said in dlperf's one line, not in
    Dask's tracebacks."""
    for name in ("distributed", "distributed.client", "distributed.core", "distributed.comm",
                 "distributed.batched", "distributed.utils", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _shown_resources(worker: DaskWorker) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted((worker.get("resources") or {}).items()) if k != "machine")


class DaskExecutor:
    """Runs a sweep's cases on the workers of the Dask scheduler at `scheduler` (see the module's doc)."""

    name = "dask"

    def __init__(self, scheduler: str, store_url: str, *, warn: Callable[[str], None] | None = None) -> None:
        self.scheduler = scheduler
        self.store_url = shared_url(store_url)
        self._warn = warn or (lambda text: None)
        self.client: Any = None
        #: address -> the scheduler's record of each live worker whose probe passed, plus "frameworks"
        self.workers: dict[str, DaskWorker] = {}
        self.excluded: dict[str, str] = {}  # address -> why it is left out

    # -- connection ----------------------------------------------------------
    def connect(self) -> DaskExecutor:
        """Reach the scheduler and check its workers can run dlperf into the store: FleetError (one line) if
        none can. Called before the run is created, so a bad address stores nothing."""
        from distributed import Client

        from dlperf.store.urls import sqlite_path

        check_address(self.scheduler)
        timeout_s = _setting("DLPERF_FLEET_CONNECT_S", CONNECT_S)
        quiet_distributed()
        try:
            self.client = Client(self.scheduler, timeout=timeout_s, set_as_default=False)
        except Exception as exc:  # OSError (refused, timed out)
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FleetError(f"cannot reach the Dask scheduler at {self.scheduler} within {timeout_s:g} s: {text} "
                             f"(start one with `dlperf fleet scheduler`; DLPERF_FLEET_CONNECT_S sets the wait)"
                             ) from None
        try:  # a worker started just now may still be joining
            self.client.wait_for_workers(1, timeout=timeout_s)
        except Exception:  # TimeoutError: said below
            pass
        if sqlite_path(self.store_url) is not None:
            self._warn(f"the store is a SQLite file ({sqlite_path(self.store_url)}): every worker must see it at "
                       f"that path (workers on this machine, or a shared file system); a fleet of machines needs "
                       f"a PostgreSQL store (--db postgresql+psycopg://...)")
        try:
            self._refresh(self._warn)
        except Exception as exc:  # the scheduler went away meanwhile
            self.close()
            raise FleetError(f"lost the Dask scheduler at {self.scheduler}: {type(exc).__name__}: {exc}") from None
        if not self.workers:
            self.close()
            why = "; ".join(f"{a}: {w}" for a, w in sorted(self.excluded.items()))
            raise FleetError(f"the Dask scheduler at {self.scheduler} has no worker that can run dlperf into "
                             f"{self._shown_url()}" + (f": {why}" if why else ": start one per machine with "
                             f"`dlperf fleet worker --scheduler {self.scheduler}`"))
        self._warn_shared_hosts()
        return self

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close(timeout=5)
            except Exception:  # the scheduler is gone: nothing to close politely
                pass
            self.client = None

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _shown_url(self) -> str:
        from sqlalchemy import make_url

        return make_url(self.store_url).render_as_string(hide_password=True)

    def _refresh(self, say: Callable[[str], None]) -> tuple[list[str], list[str]]:
        """Look at the scheduler's workers: probe those not seen before (leaving out, with one line, those that
        cannot run dlperf into the store); returns (addresses gone, addresses joined)."""
        # asked of the scheduler itself: Client.scheduler_info() returns a cache its refresh may replace
        live = dict(self.client.sync(self.client.scheduler.identity, n_workers=-1).get("workers", {}))
        gone = sorted(set(self.workers) - set(live))
        for addr in gone:
            del self.workers[addr]
        new = [a for a in live if a not in self.workers and a not in self.excluded]
        joined = []
        if new:
            try:
                probes = self.client.run(probe_worker, self.store_url, __version__, workers=new, on_error="return")
            except Exception as exc:  # the scheduler is unreachable: the next look says so
                probes = {a: exc for a in new}
            for addr in new:
                probe = probes.get(addr)
                if isinstance(probe, dict) and probe.get("ok"):
                    self.workers[addr] = live[addr] | {"frameworks": set(probe.get("frameworks") or ()),
                                                       "hostname": probe.get("host")}
                    joined.append(addr)
                    continue
                why = probe.get("error") if isinstance(probe, dict) else f"{type(probe).__name__}: {probe}"
                self.excluded[addr] = str(why)
                say(f"fleet: worker {live[addr].get('name')} ({addr}) left out: it cannot run this study into "
                    f"{self._shown_url()}: {why}")
        return gone, joined

    def _warn_shared_hosts(self) -> None:
        """Two machine-workers on one host (its name as the worker sees it) would each run a case at once
        (contended rows): say so."""
        by_host: dict[str, list[str]] = {}
        for w in self.workers.values():
            by_host.setdefault(str(w.get("hostname") or w.get("host")), []).append(str(w.get("name")))
        for host, names in sorted(by_host.items()):
            if len(names) > 1:
                self._warn(f"fleet: workers {', '.join(sorted(names))} run on one host ({host}): each runs a case "
                           f"at the same time, so their timings contend; run one `dlperf fleet worker` per machine")

    # -- the sweep -----------------------------------------------------------
    def run_cases(self, batch: CaseBatch) -> Iterator[CaseResult]:
        """Run every case of `batch` on the fleet, yielding each stored row as it lands (see the module)."""
        if self.client is None:
            self.connect()
        batch.events.note(f"fleet: {len(self.workers)} worker(s) at {self.scheduler}: " + ", ".join(
            f"{w.get('name')} ({_shown_resources(w)}) on {w.get('host')}" for w in self.workers.values()))
        queue = list(batch.todo)
        self._give_up(batch, queue, [c for c in queue if not self._runnable(c)], "not sent", "then rerun")
        inflight: dict[Any, tuple[Case, str]] = {}
        try:
            yield from _Sweep(self, batch, queue, inflight).run()
        finally:
            if inflight and self.client is not None:  # Ctrl-C, a lost lease, an error: nothing more is run
                try:
                    self.client.cancel(list(inflight), force=True)
                except Exception:  # the scheduler is gone already
                    pass

    def _runnable(self, case: Case) -> bool:
        return any(offers(w, case) for w in self.workers.values())

    def _give_up(self, batch: CaseBatch, queue: list[Case], cases: list[Case], verb: str, then: str) -> None:
        """Take `cases` out of `queue`, one line per reason no worker can run them."""
        reasons: dict[str, int] = {}
        for case in cases:
            queue.remove(case)
            why = why_none(case, self.workers.values())
            reasons[why] = reasons.get(why, 0) + 1
        for why, n in sorted(reasons.items()):
            self._not_run(batch, f"{n} case(s) {verb}: {why} at {self.scheduler} (start `dlperf fleet worker` on a "
                                 f"machine with it, {then}); they stay re-runnable")

    def _not_run(self, batch: CaseBatch, line: str) -> None:
        batch.not_run.append(line)
        batch.events.note(line)

    def submit(self, case: Case, batch: CaseBatch, addr: str) -> Any:
        """Send `case` to the worker at `addr` alone."""
        job = FleetCase(case=case, settings=batch.settings, run_id=batch.run.run_id,
                        lease_token=batch.run.lease_token or "", store_url=self.store_url,
                        frameworks=tuple(batch.frameworks), counters=batch.counters, wait_idle_s=batch.wait_idle_s)
        key = f"dlperf-{batch.run.run_id}-{case.key}#{case.repetition}-{token_hex(4)}"
        return self.client.submit(run_fleet_case, job, key=key, pure=False, resources=needs(case),
                                  workers=[addr], allow_other_workers=False)


class _Sweep:
    """One batch on the fleet: a case per idle worker, the next as one ends (see the module's doc)."""

    def __init__(self, ex: DaskExecutor, batch: CaseBatch, queue: list[Case],
                 inflight: dict[Any, tuple[Case, str]]) -> None:
        import dask
        import distributed  # noqa: F401  (its config defaults)

        self.ex, self.batch, self.queue, self.inflight = ex, batch, queue, inflight
        self.max_deaths = int(dask.config.get("distributed.scheduler.allowed-failures", 3)) + 1
        self.deaths: dict[tuple[str, int], int] = {}
        self.no_worker_s = _setting("DLPERF_FLEET_NO_WORKER_S", NO_WORKER_S)
        self.stuck_since: float | None = None

    def run(self) -> Iterator[CaseResult]:
        next_look = time.monotonic() + 2.0
        self.fill()
        while self.queue or self.inflight:
            self.batch.run.check_lease()
            for future in [f for f in self.inflight if f.status in ENDED]:
                case, addr = self.inflight.pop(future)
                row = self.ended(future, case, addr)
                if row is not None:
                    yield row
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + 2.0
                self.look()
            self.fill()
            if self.queue or self.inflight:
                time.sleep(POLL_S)

    def fill(self) -> None:
        """Give each idle worker the first queued case it can run."""
        busy = {addr for _, addr in self.inflight.values()}
        for addr, worker in list(self.ex.workers.items()):
            if addr in busy:
                continue
            case = next((c for c in self.queue if offers(worker, c)), None)
            if case is not None:
                self.queue.remove(case)
                self.inflight[self.ex.submit(case, self.batch, addr)] = (case, addr)

    def requeue(self, case: Case, front: bool = True) -> None:
        self.queue.insert(0, case) if front else self.queue.append(case)

    def died(self, case: Case, addr: str) -> None:
        """The worker running `case` died: run it elsewhere, or give it up after `max_deaths` such deaths."""
        ident = (case.key, case.repetition)
        self.deaths[ident] = self.deaths.get(ident, 0) + 1
        if self.deaths[ident] < self.max_deaths:
            self.requeue(case)
            return
        self.ex._not_run(self.batch, f"{case.key} #{case.repetition}: not stored: every worker it was given to "
                                     f"died ({self.deaths[ident]}; distributed.scheduler.allowed-failures); it "
                                     f"stays re-runnable")

    def ended(self, future: Any, case: Case, addr: str) -> CaseResult | None:
        """The stored row of an ended future; None when there is none (already stored, sent elsewhere, not run)."""
        from distributed.scheduler import KilledWorker

        if future.status == "finished":
            out = future.result()
            if out.get("already"):
                self.batch.events.note(f"{case.key} #{case.repetition}: already stored (a rerun on {out['worker']} "
                                       f"after a worker was lost); not stored again")
                return None
            return out["row"]
        if future.status == "cancelled" or self.ex.client is None or self.ex.client.status != "running":
            raise FleetError(f"lost the Dask scheduler at {self.ex.scheduler}: the cases not yet stored stay "
                             f"re-runnable (rerun the same command)")
        exc = future.exception()
        if isinstance(exc, LeaseLostError):
            raise LeaseLostError(str(exc))
        if isinstance(exc, KilledWorker):
            self.died(case, addr)
            return None
        name = (self.ex.workers.get(addr) or {}).get("name", addr)
        if isinstance(exc, FleetError):  # this worker cannot run dlperf into the store: the others may
            self.ex.workers.pop(addr, None)
            self.ex.excluded[addr] = str(exc)
            self.batch.events.note(f"fleet: worker {name} ({addr}) left out: {exc}")
            self.requeue(case)
            return None
        self.ex._not_run(self.batch, f"{case.key} #{case.repetition}: not stored: it failed on worker {name}: "
                                     + exception_line(exc))
        return None

    def look(self) -> None:
        """Say which workers left or joined; run elsewhere the cases of those gone; give up the cases no worker
        has been able to run for `no_worker_s`."""
        try:
            gone, joined = self.ex._refresh(self.batch.events.note)
        except Exception:  # the scheduler is unreachable: the futures say so
            return
        for addr in gone:
            self.batch.events.note(f"fleet: worker {addr} is gone: its case goes to another worker")
            for future, (case, at) in list(self.inflight.items()):
                if at == addr:
                    del self.inflight[future]
                    future.cancel()
                    self.died(case, addr)
        for addr in joined:
            self.batch.events.note(f"fleet: worker {self.ex.workers[addr].get('name')} ({addr}) joined")
        stuck = [c for c in self.queue if not self.ex._runnable(c)]
        if not stuck:
            self.stuck_since = None
            return
        now = time.monotonic()
        self.stuck_since = self.stuck_since or now
        if now - self.stuck_since >= self.no_worker_s:
            self.ex._give_up(self.batch, self.queue, stuck, "not run",
                             f"none was left for {self.no_worker_s:g} s: DLPERF_FLEET_NO_WORKER_S")
            self.stuck_since = None
