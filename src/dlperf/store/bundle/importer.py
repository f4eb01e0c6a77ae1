"""A bundle loaded into a store, in one transaction (`import_bundle`), and what it did (`ImportOutcome`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from dlperf.store import leases
from dlperf.store.bundle.base import (
    RESULT_FIELDS,
    RUN_FIELDS,
    TIMES,
    Bundle,
    BundleContent,
    BundleError,
    BundleRun,
    iso,
    when,
)
from dlperf.store.db import Store
from dlperf.store.nonfinite import finite_metrics, nonfinite, spelled
from dlperf.store.schema import environments, results, runs


@dataclass(frozen=True)
class ImportOutcome:
    """What an import did to the store."""

    run_id: str
    new: int  # results added
    already: int  # results the store held already (left as they were)
    replaced: int  # stored results replaced by a later re-run of the same case
    created_run: bool
    envs_new: int
    envs_reused: int
    status_before: str | None  # None: the run was new to the store
    status_after: str
    nulled: int = 0  # results written with their non-finite metrics as null (PostgreSQL)
    study_text_dropped: bool = False  # the bundle carried the study file's text, which a store cannot keep

    def line(self) -> str:
        """`run X: N new results (M already stored)` and what else changed."""
        text = f"run {self.run_id}: {self.new} new results ({self.already} already stored)"
        if self.replaced:
            text += f"; {self.replaced} replaced by a later re-run of the same case"
        if self.created_run:
            text += f"; a new run ({self.status_after})"
        elif self.status_before != self.status_after:
            text += f"; status {self.status_before} -> {self.status_after}"
        if self.envs_new or self.created_run:
            text += f"; environments: {self.envs_new} new, {self.envs_reused} already stored"
        if self.study_text_dropped:
            text += "; the study file's text is not stored (a store has no place for it: the bundle keeps it)"
        if self.nulled:
            whose = "result's" if self.nulled == 1 else "results'"
            text += (f"; {self.nulled} {whose} non-finite metrics stored as "
                     f"null (PostgreSQL's JSON cannot hold NaN or infinity; each value is kept, spelled, in the "
                     f"result's metrics.nonfinite)")
        return text


def import_bundle(store: Store, bundle: Bundle, *, lease_stale_s: float) -> ImportOutcome:
    """Load `bundle` into `store` in one transaction (see `dlperf.store.bundle`); BundleError where the store
    holds a run of that id from another study or environment, or where a live process is executing that run
    (its lease's owner is not provably gone, `lease_stale_s` being the stale limit of its heartbeat: the
    runner's, `runner.lifecycle.lease_stale_s()`). Retried once where another process inserted the same
    environment or results at the same moment."""
    for attempt in (1, 2):
        try:
            with store.engine.begin() as conn:
                return _import(conn, bundle, lease_stale_s)
        except IntegrityError as exc:
            if attempt == 2:
                raise _refused(bundle, exc) from None
        except DBAPIError as exc:  # a value the database cannot hold (PostgreSQL: DataError)
            raise _refused(bundle, exc) from None
    raise AssertionError("unreachable")


def _refused(bundle: Bundle, exc: DBAPIError) -> BundleError:
    """The database's refusal in one line (its first: PostgreSQL adds DETAIL lines)."""
    why = (str(exc.orig) or type(exc.orig).__name__).strip().splitlines()[0]
    return BundleError(f"run {bundle.run['id']}: the store refused the bundle's rows ({why}); nothing was imported")


def _import(conn: Connection, bundle: Bundle, lease_stale_s: float) -> ImportOutcome:
    content, run = bundle.content, bundle.run
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        _refuse_nonfinite(content)
    env_ids: dict[str, int] = {}
    envs_new = 0
    for e in content["environments"]:
        found = conn.execute(select(environments.c.id)
                             .where(environments.c.fingerprint_hash == e["fingerprint_hash"])).scalar()
        if found is None:
            key = conn.execute(insert(environments).values(
                fingerprint_hash=e["fingerprint_hash"], data=e["data"],
                created_at=when(e["created_at"], "created_at"))).inserted_primary_key
            assert key is not None
            found = key[0]
            envs_new += 1
        env_ids[e["fingerprint_hash"]] = int(found)
    stored = conn.execute(select(runs.c.study, runs.c.study_hash, runs.c.status, runs.c.finished_at,
                                 environments.c.fingerprint_hash)
                          .select_from(runs.join(environments, runs.c.env_id == environments.c.id))
                          .where(runs.c.id == run["id"])).first()
    if stored is not None and stored.study_hash != run["study_hash"]:
        raise BundleError(f"run {run['id']} is already in this store with another study hash ({stored.study_hash}; "
                          f"the bundle's: {run['study_hash']}): not the same run; nothing was imported")
    if stored is not None and stored.study != run["study"]:
        raise BundleError(f"run {run['id']} is already in this store with another study name ({stored.study}; the "
                          f"bundle's: {run['study']}): not the same run; nothing was imported")
    if stored is not None and stored.fingerprint_hash != run["env_fingerprint_hash"]:
        raise BundleError(f"run {run['id']} is already in this store from another environment (fingerprint "
                          f"{stored.fingerprint_hash[:12]}, the bundle's: {run['env_fingerprint_hash'][:12]}): "
                          f"not the same run; nothing was imported")
    if stored is None:
        conn.execute(insert(runs).values(**_row(run, RUN_FIELDS), env_id=env_ids[run["env_fingerprint_hash"]]))
    have = {(r.case_key, int(r.repetition)): r for r in conn.execute(
        select(results.c.id, results.c.case_key, results.c.repetition, results.c.finished_at)
        .where(results.c.run_id == run["id"]))}
    new = already = replaced = nulled = 0
    for r in content["results"]:
        values = {**_row(r, RESULT_FIELDS), "run_id": run["id"], "env_id": env_ids[r["env_fingerprint_hash"]]}
        old = have.get((r["case_key"], r["repetition"]))
        if old is not None and when(iso(old.finished_at), "stored") >= values["finished_at"]:
            already += 1
            continue
        if postgres and nonfinite(values["metrics"]):
            values["metrics"] = finite_metrics(values["metrics"])
            nulled += 1
        if old is None:
            conn.execute(insert(results).values(**values))
            new += 1
        else:
            conn.execute(update(results).where(results.c.id == old.id).values(**values))
            replaced += 1
    status_before = None if stored is None else str(stored.status)
    status_after = run["status"] if stored is None else str(stored.status)
    if stored is not None and (new or replaced or _ended_later(run, stored.finished_at)):
        status_after = run["status"]
        conn.execute(update(runs).where(runs.c.id == run["id"]).values(
            status=run["status"], finished_at=when(run["finished_at"], "finished_at")))
    if stored is not None:
        _refuse_if_executed(conn, run["id"], lease_stale_s)
    return ImportOutcome(run["id"], new, already, replaced, stored is None, envs_new,
                         len(env_ids) - envs_new, status_before, status_after, nulled,
                         study_text_dropped=stored is None and content["study"].get("yaml") is not None)


def _refuse_nonfinite(content: BundleContent) -> None:
    """BundleError naming the first NaN or infinity that PostgreSQL cannot hold outside the metrics (those are
    stored as null, `store.nonfinite.finite_metrics`; raw samples with one never get this far, `shape`)."""
    run = content["run"]
    where = [(f"the run's {k}", run[k]) for k in ("filters", "settings", "derived")]
    where += [(f"environment {e['fingerprint_hash'][:12]}'s data", e["data"]) for e in content["environments"]]
    where += [(f"result {r['case_key']!r} repetition {r['repetition']}'s params", r["params"])
              for r in content["results"]]
    for what, value in where:
        bad = nonfinite(value)
        if bad:
            raise BundleError(f"run {run['id']}: {what}.{bad[0][0]} is {spelled(bad[0][1])}, which PostgreSQL's "
                              f"JSON cannot hold; nothing was imported")


def _ended_later(run: BundleRun, stored_end: datetime | None) -> bool:
    """Whether the bundle's run ended after the stored one (a stored run that has not ended is older): resumed
    to its end since, even where that brought no new result."""
    end = when(run["finished_at"], "finished_at")
    if end is None:
        return False
    stored = when(iso(stored_end), "stored") if stored_end is not None else None
    return stored is None or end > stored


def _refuse_if_executed(conn: Connection, run_id: str, stale_s: float) -> None:
    """BundleError where a process that may still be alive holds the run's lease: its status is its own, and a
    result inserted under it would make its own measurement of that case be dropped as already stored.
    Checked after the writes: on SQLite they hold the database, so no owner can come between."""
    held = leases.current(conn, run_id)
    if held is not None and held.gone_reason(stale_s) is None:
        raise BundleError(f"run {run_id} is being executed by {held.describe()}; import after it ends; nothing "
                          f"was imported")


def _row(data: Mapping[str, object], fields: tuple[str, ...]) -> dict[str, Any]:
    """A bundle's row as the store's columns want it (datetimes parsed)."""
    return {k: when(data[k], k) if k in TIMES else data[k] for k in fields}
