"""Open a results database (SQLite path or SQLAlchemy URL), migrate it, read and write rows."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, Engine, case, exists, func, insert, inspect, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.core.status import RunStatus, check_run_status
from dlperf.errors import LeaseLostError, StoreError, UnknownRunError
from dlperf.store import leases, schema
from dlperf.store.engines import migration_lock, open_engine
from dlperf.store.nonfinite import finite_metrics, nonfinite
from dlperf.store.rows import ListedRun, RunRow
from dlperf.store.schema import MIGRATIONS, environments, meta, results, run_leases, runs
from dlperf.store.urls import sqlite_path


def default_db_path() -> Path:
    """$DLPERF_DB, else $XDG_DATA_HOME/dlperf/results.sqlite (~/.local/share/dlperf/...)."""
    env = os.environ.get("DLPERF_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dlperf" / "results.sqlite"


def to_url(db: str | os.PathLike[str] | None) -> str:
    """A path becomes a SQLite URL; anything with '://' is taken as an SQLAlchemy URL."""
    if db is None:
        db = os.environ.get("DLPERF_DB") or default_db_path()
    text = str(db)
    if "://" in text:
        return text
    path = Path(text).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder of database {path}: {exc.strerror}") from None
    return f"sqlite:///{path}"


def now() -> datetime:
    return datetime.now(UTC)


#: The first bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"
#: How many run ids `create_run` draws before giving up (the 4 hex digits of an id can repeat within a second).
RUN_ID_ATTEMPTS = 8
#: The longest run reference looked up: longer than any run id (a study name, a time and 4 hex digits), and short
#: enough that its LIKE pattern (escaped, UTF-8) stays under SQLite's 50,000-byte limit.
MAX_RUN_REF_CHARS = 1000


def _check_sqlite_file(url: str) -> None:
    """A SQLite path that holds something other than a database is refused, never written into."""
    path = sqlite_path(url)
    if path is None:
        return
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return  # a new store (SQLite writes the header on first use)
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read database {path}: {exc.strerror}") from None
    if head != SQLITE_HEADER:
        raise StoreError(f"{path} is not a SQLite database (it holds {path.stat().st_size} bytes of something else): "
                         f"give a dlperf store, or a new path for a new one; nothing was written to it")


class Store:
    """The results store. Cheap to open; every write is its own short transaction."""

    def __init__(self, db: str | os.PathLike[str] | None = None, *, migrations: list[schema.Migration] | None = None):
        self.url = to_url(db)
        _check_sqlite_file(self.url)
        self._migrations = MIGRATIONS if migrations is None else migrations
        try:
            self.engine: Engine = open_engine(self.url)
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise StoreError(f"cannot open database {self.url}: {exc}") from None
        self.schema_version = self._migrate()

    @property
    def target_version(self) -> int:
        return len(self._migrations)

    # -- schema --------------------------------------------------------
    def _read_version(self, conn: Connection) -> int:
        try:
            names = set(inspect(conn).get_table_names())
        except OperationalError as exc:
            raise StoreError(f"cannot open database {self.url}: {exc.orig}") from None
        if not names:
            return 0
        if meta.name not in names:
            raise StoreError(f"{self.url} is not a dlperf database (it has tables but no {meta.name})")
        value = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).scalar()
        try:
            version = 0 if value is None else int(value)
        except ValueError:
            version = -1
        if version < 0:
            raise StoreError(f"database {self.url} has an unreadable schema_version {value!r} in {meta.name}: it "
                             f"was not written by dlperf, or is damaged; nothing was written to it")
        if version > self.target_version:
            raise StoreError(
                f"database {self.url} has schema version {version}, newer than this dlperf reads "
                f"({self.target_version}): upgrade dlperf, or use another --db"
            )
        return version

    def _migrate(self) -> int:
        """Bring the schema to the target version, one step per transaction. Each step runs under a lock
        (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock) after reading the version again inside it,
        so that processes opening a new or old store at once each see it whole, and migrate it once."""
        with self.engine.connect() as conn:
            version = self._read_version(conn)  # no lock where the schema is current (read-only stores too)
        for _ in range(self.target_version + 1):  # one step per pass: more passes means a step did not stick
            if version >= self.target_version:
                break
            with migration_lock(self.engine) as conn:
                version = self._read_version(conn)
                if version < self.target_version:
                    self._migrations[version](conn)
                    _set_version(conn, version + 1)
                    version += 1
        else:
            raise StoreError(f"database {self.url}: its schema migrations did not stick (it reads version "
                             f"{version} after every step); nothing more was written")
        return version

    def check_writable(self) -> None:
        """StoreError (one line) where this store cannot be written, before a command does any work: an
        update that changes nothing, rolled back (SQLite: a read-only file, folder or `mode=ro` URL)."""
        with self.engine.connect() as conn, conn.begin() as tx:
            conn.execute(update(meta).where(meta.c.key == "schema_version").values(value=meta.c.value))
            tx.rollback()

    # -- environments --------------------------------------------------
    def environment_id(self, fp: dict[str, Any], fp_hash: str) -> int:
        """Id of this fingerprint, inserting it the first time it is seen."""
        with self.engine.begin() as conn:
            found = conn.execute(
                select(environments.c.id).where(environments.c.fingerprint_hash == fp_hash)
            ).scalar()
            if found is not None:
                return int(found)
        try:
            with self.engine.begin() as conn:
                res = conn.execute(
                    insert(environments).values(fingerprint_hash=fp_hash, data=fp, created_at=now())
                )
                key = res.inserted_primary_key
                assert key is not None
                return int(key[0])
        except IntegrityError:  # another process inserted it first
            with self.engine.connect() as conn:
                return int(conn.execute(
                    select(environments.c.id).where(environments.c.fingerprint_hash == fp_hash)).scalar_one())

    def environment(self, env_id: int) -> Environment:
        """An environment's data as first stored (its identity, and the derived fields of its first run)."""
        with self.engine.connect() as conn:
            data = conn.execute(select(environments.c.data).where(environments.c.id == env_id)).scalar()
        return cast(Environment, data or {})

    def run_environment(self, run_id: str) -> Environment:
        """The environment a run ran in, as its reports see it: the environment's data with the run's own
        derived figures (peaks, overrides, dlperf's version and commit, recorded at its creation) laid over
        it, so that a report of an old run keeps the peaks it ran under."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(environments.c.data, runs.c.derived)
                .select_from(runs.join(environments, runs.c.env_id == environments.c.id))
                .where(runs.c.id == run_id)
            ).first()
        if row is None:
            raise UnknownRunError(f"unknown run {run_id!r} in {self.url} (see 'dlperf runs')")
        return cast(Environment, {**(row.data or {}), **(row.derived or {})})

    # -- runs ----------------------------------------------------------
    def create_run(self, *, study: str, variant: str, study_hash: str, study_path: str,
                   filters: dict[str, Any], settings: dict[str, Any], env_id: int, n_cases: int,
                   dlperf_version: str, derived: dict[str, Any] | None = None,
                   lease: tuple[leases.Owner, str] | None = None) -> str:
        """A new run in environment `env_id`; `derived`: what its fingerprint holds beyond the environment's
        identity (hardware.identity.derived), kept with the run for its reports. With `lease` (owner,
        token), the run is created with its lease in one transaction: never `running` without an owner."""
        started = now()
        for attempt in range(RUN_ID_ATTEMPTS):
            # study, second, 4 hex digits: two runs of one study started in the same second draw again
            run_id = f"{study}-{started:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
            try:
                with self.engine.begin() as conn:
                    conn.execute(insert(runs).values(
                        id=run_id, study=study, variant=variant, study_hash=study_hash, study_path=study_path,
                        filters=filters, settings=settings, env_id=env_id, status="running", n_cases=n_cases,
                        dlperf_version=dlperf_version, started_at=started, derived=derived,
                    ))
                    if lease is not None:
                        conn.execute(insert(run_leases).values(**leases.lease_values(run_id, *lease,
                                                                                     leases.db_now(conn))))
                return run_id
            except IntegrityError:
                with self.engine.connect() as conn:
                    taken = conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is not None
                if attempt == RUN_ID_ATTEMPTS - 1 or not taken:
                    raise  # not an id taken by another run: a real constraint failure
        raise AssertionError("unreachable")

    def find_resumable(self, *, study: str, variant: str, study_hash: str, filters: dict[str, Any],
                       env_id: int | None) -> str | None:
        """The newest unfinished run of the same study, variant, filters and environment (any, for None)."""
        query = (select(runs.c.id, runs.c.filters)
                 .where(runs.c.study == study, runs.c.variant == variant, runs.c.study_hash == study_hash,
                        runs.c.status != "complete")
                 .order_by(runs.c.started_at.desc()))
        if env_id is not None:
            query = query.where(runs.c.env_id == env_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        for row in rows:
            if row.filters == filters:
                return str(row.id)
        return None

    def set_run_status(self, run_id: str, status: RunStatus, *, lease_token: str | None = None) -> bool:
        """Mark the run `status` (a RunStatus; anything else is a ValueError); finished unless running.
        With `lease_token`, only while that token holds the run's lease (in one statement): a process whose
        run was taken over never overwrites its new owner's status. False where nothing was marked."""
        values: dict[str, str | datetime | None] = {"status": check_run_status(status)}
        values["finished_at"] = now() if status != "running" else None
        query = update(runs).where(runs.c.id == run_id)
        if lease_token is not None:
            query = query.where(exists().where(run_leases.c.run_id == run_id, run_leases.c.token == lease_token))
        with self.engine.begin() as conn:
            return conn.execute(query.values(**values)).rowcount == 1

    def resolve_run(self, ref: str) -> str:
        """A run id from an exact id, 'latest', or a unique prefix. A reference longer than any run id is unknown
        before it reaches the database (SQLite refuses a LIKE pattern of 50,000 bytes as too complex)."""
        if not ref.strip():
            raise UnknownRunError("an empty run reference: give a run id, a unique prefix of one, or 'latest'")
        if len(ref) > MAX_RUN_REF_CHARS:
            raise UnknownRunError(f"unknown run {ref[:40]!r}... ({len(ref):,} characters; a run id has at most "
                                  f"{MAX_RUN_REF_CHARS:,}) in {self.url} (see 'dlperf runs')")
        with self.engine.connect() as conn:
            if ref == "latest":
                found = conn.execute(select(runs.c.id).order_by(runs.c.started_at.desc()).limit(1)).scalar()
                if found is None:
                    raise UnknownRunError(f"no runs in {self.url} yet: start one with 'dlperf run smoke'")
                return str(found)
            ids = [r[0] for r in conn.execute(select(runs.c.id).where(runs.c.id.startswith(ref, autoescape=True)))]
        if ref in ids:
            return ref
        if len(ids) == 1:
            return str(ids[0])
        if not ids:
            raise UnknownRunError(f"unknown run {ref!r} in {self.url} (see 'dlperf runs')")
        raise UnknownRunError(f"run {ref!r} is ambiguous: {', '.join(sorted(ids)[:5])}")

    def run(self, ref: str) -> RunRow:
        """The run `ref` names (`resolve_run`)."""
        run_id = self.resolve_run(ref)
        with self.engine.connect() as conn:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().one()
        return RunRow.from_row(row)

    def runs_of_study(self, study: str) -> list[RunRow]:
        """Runs of one study, newest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(runs).where(runs.c.study == study).order_by(runs.c.started_at.desc()))
            return [RunRow.from_row(r) for r in rows.mappings()]

    def list_runs(self, limit: int = 20) -> list[ListedRun]:
        """The newest `limit` runs, newest first, each with its counts of stored and ok cases and its lease."""
        counts = (
            select(results.c.run_id, func.count().label("n_done"),
                   func.sum(case((results.c.status == "ok", 1), else_=0)).label("n_ok"))
            .group_by(results.c.run_id).subquery()
        )
        q = (
            select(runs, counts.c.n_done, counts.c.n_ok)
            .select_from(runs.outerjoin(counts, counts.c.run_id == runs.c.id))
            .order_by(runs.c.started_at.desc()).limit(limit)
        )
        with self.engine.connect() as conn:
            rows = [(RunRow.from_row(r), r["n_done"], r["n_ok"]) for r in conn.execute(q).mappings()]
            read_at = leases.db_now(conn)
            held = {lease.run_id: lease for lease in (leases.Lease.from_row(row, read_at) for row in conn.execute(
                select(run_leases).where(run_leases.c.run_id.in_([r.id for r, _, _ in rows]))))}
        return [ListedRun(**vars(r), n_done=None if done is None else int(done), n_ok=None if ok is None else int(ok),
                          lease=held.get(r.id)) for r, done, ok in rows]

    def lease(self, run_id: str) -> leases.Lease | None:
        """Who is executing the run (None: nobody)."""
        return leases.current(self.engine, run_id)

    # -- results -------------------------------------------------------
    def done_cases(self, run_id: str) -> set[tuple[str, int]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(results.c.case_key, results.c.repetition).where(results.c.run_id == run_id)
            ).all()
        return {(r.case_key, int(r.repetition)) for r in rows}

    def has_result(self, run_id: str, case_key: str, repetition: int) -> bool:
        """Whether this case-repetition of the run is stored (one indexed row, not the run's whole `done_cases`)."""
        with self.engine.connect() as conn:
            return conn.execute(
                select(results.c.id).where(results.c.run_id == run_id, results.c.case_key == case_key,
                                           results.c.repetition == repetition).limit(1)
            ).first() is not None

    def add_result(self, result: CaseResult, *, lease_token: str | None = None) -> bool:
        """Insert one case's result; False if that case was already stored (never duplicated).

        With `lease_token`, only while that token holds the run's lease (checked, and the heartbeat
        refreshed, in the same transaction): else LeaseLostError and nothing is stored."""
        row = result.as_row()
        if row["id"] is None:
            del row["id"]  # the store numbers it
        if self.engine.dialect.name == "postgresql" and nonfinite(row["metrics"]):
            row["metrics"] = finite_metrics(row["metrics"])  # its JSON cannot hold NaN: null, and said so
        try:
            with self.engine.begin() as conn:
                if lease_token is not None and not leases.heartbeat(conn, result.run_id, lease_token):
                    raise LeaseLostError(_lost(conn, result.run_id))
                conn.execute(insert(results).values(**row))
        except IntegrityError:
            return False
        return True

    def delete_results(self, run_id: str, statuses: Iterable[str]) -> int:
        """Forget results with these statuses so a rerun tries them again (`--retry-failed`)."""
        with self.engine.begin() as conn:
            res = conn.execute(
                results.delete().where(results.c.run_id == run_id, results.c.status.in_(list(statuses)))
            )
        return int(res.rowcount or 0)

    def results_of_workload(self, workload: str, run_ids: Iterable[str] | None = None) -> list[CaseResult]:
        """Every stored `ok` result of one workload, across runs (or only these runs), oldest first."""
        q = select(results).where(results.c.workload == workload, results.c.status == "ok")
        if run_ids is not None:
            q = q.where(results.c.run_id.in_(list(run_ids)))
        with self.engine.connect() as conn:
            return [CaseResult.from_row(dict(r)) for r in conn.execute(q.order_by(results.c.id)).mappings().all()]

    def results(self, run_id: str) -> list[CaseResult]:
        """A run's results, typed, in the order they were stored; statistics recomputed from the raw samples."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(results).where(results.c.run_id == run_id).order_by(results.c.id)
            ).mappings().all()
        return [CaseResult.from_row(dict(r)) for r in rows]


def _set_version(conn: Any, version: int) -> None:
    exists = conn.execute(select(meta.c.key).where(meta.c.key == "schema_version")).scalar()
    if exists is None:
        conn.execute(insert(meta).values(key="schema_version", value=str(version)))
    else:
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value=str(version)))


def _lost(conn: Connection, run_id: str) -> str:
    """The one line of a process whose lease on `run_id` was taken over."""
    now_lease = leases.current(conn, run_id)
    who = f" by {now_lease.describe()}" if now_lease is not None else ""
    return (f"run {run_id} was taken over{who}: this process stops here and stores nothing more "
            f"(see 'dlperf runs')")


