"""The schema's migration steps, each frozen as databases in the field ran it.

A step never imports the live table definitions (`store.schema`) nor any code outside the store
whose meaning may change later: it carries its own copy of what it needs, so that a database
upgraded today and one upgraded in a year end up the same.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    select,
    text,
    update,
)


def _v1_tables() -> tuple[Table, ...]:
    """The tables of schema version 1, as it was created."""
    md = MetaData()
    meta = Table("dlperf_meta", md, Column("key", String(64), primary_key=True), Column("value", Text, nullable=False))
    environments = Table(
        "environments", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("fingerprint_hash", String(64), nullable=False, unique=True),
        Column("data", JSON, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
    )
    runs = Table(
        "runs", md,
        Column("id", String(128), primary_key=True),
        Column("study", String(128), nullable=False),
        Column("variant", String(16), nullable=False),
        Column("study_hash", String(64), nullable=False),
        Column("study_path", Text, nullable=False),
        Column("filters", JSON, nullable=False),
        Column("settings", JSON, nullable=False),
        Column("env_id", Integer, ForeignKey("environments.id"), nullable=False),
        Column("status", String(16), nullable=False),
        Column("n_cases", Integer, nullable=False),
        Column("dlperf_version", String(32), nullable=False),
        Column("started_at", DateTime(timezone=True), nullable=False),
        Column("finished_at", DateTime(timezone=True)),
    )
    results = Table(
        "results", md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_id", String(128), ForeignKey("runs.id"), nullable=False),
        Column("case_key", Text, nullable=False),
        Column("repetition", Integer, nullable=False),
        Column("workload", String(64), nullable=False),
        Column("framework", String(64), nullable=False),
        Column("device", String(32), nullable=False),
        Column("params", JSON, nullable=False),
        Column("status", String(16), nullable=False),
        Column("reason", Text),
        Column("measurement", JSON),
        Column("metrics", JSON),
        Column("env_id", Integer, ForeignKey("environments.id"), nullable=False),
        Column("wall_s", Float),
        Column("started_at", DateTime(timezone=True), nullable=False),
        Column("finished_at", DateTime(timezone=True), nullable=False),
        UniqueConstraint("run_id", "case_key", "repetition", name="uq_result_case"),
        Index("ix_results_run", "run_id"),
    )
    return meta, environments, runs, results


def v0_to_v1(conn: Connection) -> None:
    """Create the first schema: meta, environments, runs, results."""
    tables = _v1_tables()
    tables[0].metadata.create_all(conn, tables=list(tables))


# -- v1 -> v2: environments keyed by identity only; each run records its derived data -----------------

#: The fingerprint fields that identify an environment from version 2 on (hardware.identity's
#: IDENTITY_KEYS and GPU_IDENTITY_KEYS when this step was written; a test holds them equal).
_V2_IDENTITY_KEYS = ("cpu_model", "cpu_flags", "cpu_physical_cores", "cpu_logical_cores", "threads", "ram_bytes",
                     "os", "kernel", "machine", "python", "hostname_sha256", "gpus", "frameworks")
_V2_GPU_IDENTITY_KEYS = ("index", "name", "memory_bytes", "driver", "cuda_driver")

_v2 = MetaData()
_environments = Table("environments", _v2, Column("id", Integer, primary_key=True),
                      Column("fingerprint_hash", String(64)), Column("data", JSON))
_runs = Table("runs", _v2, Column("id", String(128), primary_key=True), Column("env_id", Integer),
              Column("derived", JSON))
_results = Table("results", _v2, Column("id", Integer, primary_key=True), Column("env_id", Integer))


def v2_identity_hash(fp: dict[str, Any]) -> str:
    """The version-2 identity hash of a fingerprint: its identity fields only (canonical JSON, SHA-256)."""
    ident = {k: fp[k] for k in _V2_IDENTITY_KEYS if k in fp}
    if isinstance(ident.get("gpus"), list):
        ident["gpus"] = [{k: g[k] for k in _V2_GPU_IDENTITY_KEYS if k in g} for g in ident["gpus"]]
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:20]


def v2_derived(fp: dict[str, Any]) -> dict[str, Any]:
    """What a version-2 run records beside its environment: the fields that are not identity, and the
    GPU records whole (their peaks are derived)."""
    out = {k: v for k, v in fp.items() if k not in _V2_IDENTITY_KEYS}
    if "gpus" in fp:
        out["gpus"] = fp["gpus"]
    return out


def v1_to_v2(conn: Connection) -> None:
    """Add `runs.derived` (nullable JSON) and fill it for every run from its environment's data; re-key
    each environment by its identity hash, merging rows that now share one into the oldest (runs and
    results repointed to it). A run of a merged environment keeps its own peaks in `derived`."""
    conn.execute(text(f"ALTER TABLE runs ADD COLUMN derived {JSON().compile(dialect=conn.dialect)}"))
    kept: dict[str, int] = {}
    envs = conn.execute(select(_environments.c.id, _environments.c.data).order_by(_environments.c.id)).all()
    for env_id, data in envs:
        fp = data if isinstance(data, dict) else {}
        conn.execute(update(_runs).where(_runs.c.env_id == env_id).values(derived=v2_derived(fp)))
        keep = kept.setdefault(v2_identity_hash(fp), env_id)
        if keep != env_id:
            for table in (_runs, _results):
                conn.execute(update(table).where(table.c.env_id == env_id).values(env_id=keep))
            conn.execute(delete(_environments).where(_environments.c.id == env_id))
    # Two passes, so that no new hash meets an old one still in place (the column is unique).
    for env_id in kept.values():
        conn.execute(update(_environments).where(_environments.c.id == env_id)
                     .values(fingerprint_hash=f"rekeying-{env_id}"))
    for new_hash, env_id in kept.items():
        conn.execute(update(_environments).where(_environments.c.id == env_id).values(fingerprint_hash=new_hash))


# -- v2 -> v3: run leases (who is executing a run) ------------------------------------------------------

def v2_to_v3(conn: Connection) -> None:
    """Add `run_leases`: one row per run being executed, naming its owner (host, PID and the PID's start
    time, against PID reuse), when it took the run, its last heartbeat and a random token. The primary key
    on run_id makes taking a lease one atomic INSERT; runs left `running` by older versions have no row."""
    md = MetaData()
    Table("runs", md, Column("id", String(128), primary_key=True))
    leases = Table(
        "run_leases", md,
        Column("run_id", String(128), ForeignKey("runs.id"), primary_key=True),
        Column("host", String(255), nullable=False),
        Column("pid", Integer, nullable=False),
        Column("pid_started_s", Float, nullable=False),
        Column("acquired_at", DateTime(timezone=True), nullable=False),
        Column("heartbeat_at", DateTime(timezone=True), nullable=False),
        Column("token", String(64), nullable=False),
    )
    md.create_all(conn, tables=[leases])


# -- v3 -> v4: a run's variant as long as dlperf writes it ----------------------------------------------

def v3_to_v4(conn: Connection) -> None:
    """`runs.variant` becomes unbounded text: a `maxbatch` run's variant is its target and `-p` parameters
    (`transformer model=gpt2-tiny seq_len=8`), longer than the 16 characters of `VARCHAR(16)`, which PostgreSQL
    enforced (the insert failed) and SQLite never did (a declared length is not checked there, and its column
    already holds text of any length: nothing to change)."""
    if conn.dialect.name != "sqlite":
        conn.execute(text("ALTER TABLE runs ALTER COLUMN variant TYPE TEXT"))
