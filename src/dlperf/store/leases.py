"""Run leases: who is executing a run, so that two processes never execute one run at once.

A lease is one `run_leases` row per run (its primary key is the run id): taking a free run is one INSERT,
which the database makes atomic; taking over a run whose owner is gone is a compare-and-swap UPDATE on
the old owner's token (exactly one row changes for exactly one taker). The owner refreshes its heartbeat,
stores each case only while its token is still the run's (`Store.add_result(..., lease_token=...)`), and
deletes its row when it stops. The policy (when to refuse, when to take over) is the runner's
(`runner.lifecycle`); this module holds the rows and the facts about an owner.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from sqlalchemy import Connection, Engine, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from dlperf.errors import StoreError
from dlperf.store.schema import run_leases, runs

#: How close two readings of one process's start time are (psutil derives it from boot time and ticks).
START_TIME_TOLERANCE_S = 1.0


def _utc(when: datetime) -> datetime:
    """In UTC: SQLite gives datetimes back without their zone (dlperf writes them in UTC); PostgreSQL gives
    them in its session's zone."""
    return when.astimezone(UTC) if when.tzinfo is not None else when.replace(tzinfo=UTC)


def db_now(conn: Connection) -> datetime:
    """Now, on the store's clock: PostgreSQL's server clock, which every host sharing the store reads, so a
    host whose clock runs ahead never judges a live owner stale; SQLite's store is on one host: its clock."""
    if conn.dialect.name == "postgresql":
        return _utc(conn.execute(select(func.clock_timestamp())).scalar_one())
    return datetime.now(UTC)


def process_start_s(pid: int) -> float | None:
    """When process `pid` started (epoch seconds), None where it does not run (a zombie does not run)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:  # it runs, but we may not look: count it as running, started as claimed
        return float("nan")


def host_id() -> str:
    """This host as a lease names it: the host name, and the PID namespace where it is not the first one, so
    that two containers sharing a host name (host networking) but not their PIDs are told apart; a PID is
    only checked by a process that sees the same PIDs."""
    name = socket.gethostname()
    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return name
    return name if ns == INITIAL_PID_NS else f"{name} (pid namespace {ns})"


#: The inode of the kernel's first PID namespace (PROC_PID_INIT_INO): processes outside any container.
INITIAL_PID_NS = 0xEFFFFFFC


@dataclass(frozen=True)
class Owner:
    """A process that executes a run: its host, PID and the PID's start time."""

    host: str
    pid: int
    pid_started_s: float

    @classmethod
    def me(cls) -> Owner:
        """This process."""
        started = process_start_s(os.getpid())
        return cls(host_id(), os.getpid(), started if started is not None else 0.0)


@dataclass(frozen=True)
class Lease:
    """A run's lease as stored: its owner, when it was taken, the last heartbeat, the owner's token."""

    run_id: str
    owner: Owner
    acquired_at: datetime
    heartbeat_at: datetime
    token: str
    #: When it was read, on the store's clock (`db_now`): heartbeat ages are measured against it.
    read_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Any, read_at: datetime | None = None) -> Lease:
        return cls(row.run_id, Owner(row.host, int(row.pid), float(row.pid_started_s)), _utc(row.acquired_at),
                   _utc(row.heartbeat_at), row.token, read_at)

    def heartbeat_age_s(self, now: datetime | None = None) -> float:
        return ((now or self.read_at or datetime.now(UTC)) - self.heartbeat_at).total_seconds()

    def gone_reason(self, stale_s: float, now: datetime | None = None) -> str | None:
        """Why its owner is provably gone (its PID on this host no longer runs, or is another process now;
        or its heartbeat is older than `stale_s`), or None while it may still be executing the run."""
        o = self.owner
        if o.host == host_id():
            started = process_start_s(o.pid)
            if started is None:
                return f"pid {o.pid} on {o.host} is no longer running"
            if started == started and abs(started - o.pid_started_s) > START_TIME_TOLERANCE_S:  # nan: not readable
                return f"pid {o.pid} on {o.host} is another process now"
        age = self.heartbeat_age_s(now)
        if age > stale_s:
            return f"its last heartbeat was {age:.0f} s ago (stale after {stale_s:g} s)"
        return None

    def describe(self, now: datetime | None = None) -> str:
        """The owner in words: host, pid, since when, heartbeat age."""
        return (f"pid {self.owner.pid} on {self.owner.host} since {self.acquired_at:%Y-%m-%d %H:%M:%S} UTC, "
                f"last heartbeat {self.heartbeat_age_s(now):.0f} s ago")


def new_token() -> str:
    return secrets.token_hex(16)


class LeaseValues(TypedDict):
    """A `run_leases` row's values (`lease_values`): the run, its owner, when it was acquired and last beat."""

    run_id: NotRequired[str]  # always written; `take_over` drops it to update the row in place
    host: str
    pid: int
    pid_started_s: float
    acquired_at: datetime
    heartbeat_at: datetime
    token: str


def lease_values(run_id: str, owner: Owner, token: str, when: datetime) -> LeaseValues:
    """The row that gives `run_id` to `owner` under `token` from `when`."""
    return {"run_id": run_id, "host": owner.host, "pid": owner.pid, "pid_started_s": owner.pid_started_s,
            "acquired_at": when, "heartbeat_at": when, "token": token}


def current(engine: Engine | Connection, run_id: str) -> Lease | None:
    """The run's lease, or None where nobody holds it."""
    query = select(run_leases).where(run_leases.c.run_id == run_id)
    if isinstance(engine, Connection):
        row, read_at = engine.execute(query).first(), db_now(engine)
    else:
        with engine.connect() as conn:
            row, read_at = conn.execute(query).first(), db_now(conn)
    return None if row is None else Lease.from_row(row, read_at)


def acquire(engine: Engine, run_id: str, owner: Owner, token: str) -> Lease | None:
    """Take the free lease of `run_id` (one INSERT: of two takers one wins); None when taken, else the lease
    that was there (then nothing changed)."""
    try:
        with engine.begin() as conn:
            conn.execute(insert(run_leases).values(**lease_values(run_id, owner, token, db_now(conn))))
        return None
    except IntegrityError:
        held = current(engine, run_id)
        if held is not None:
            return held
        with engine.connect() as conn:
            if conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is None:
                raise StoreError(f"unknown run {run_id!r}: it has no lease to take") from None
        return acquire(engine, run_id, owner, token)  # released between the INSERT and the read: again


def take_over(engine: Engine, old: Lease, owner: Owner, token: str) -> bool:
    """Replace the lease `old` by one of `owner`, only if `old` still holds it (compare-and-swap on its
    token): True for exactly one of several takers."""
    with engine.begin() as conn:
        values = lease_values(old.run_id, owner, token, db_now(conn))
        del values["run_id"]
        res = conn.execute(update(run_leases)
                           .where(run_leases.c.run_id == old.run_id, run_leases.c.token == old.token)
                           .values(**values))
    return res.rowcount == 1


def heartbeat(engine: Engine | Connection, run_id: str, token: str) -> bool:
    """Refresh the lease's heartbeat; False when `token` no longer holds it (taken over)."""
    def beat(conn: Connection) -> bool:
        return conn.execute(update(run_leases).where(run_leases.c.run_id == run_id, run_leases.c.token == token)
                            .values(heartbeat_at=db_now(conn))).rowcount == 1

    if isinstance(engine, Connection):
        return beat(engine)
    with engine.begin() as conn:
        return beat(conn)


def release(engine: Engine, run_id: str, token: str) -> None:
    """Give the lease back (only if `token` still holds it)."""
    with engine.begin() as conn:
        conn.execute(delete(run_leases).where(run_leases.c.run_id == run_id, run_leases.c.token == token))
