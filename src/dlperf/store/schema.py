"""Database tables (SQLAlchemy Core) and the step-by-step migrations that build them.

`SCHEMA_VERSION` is what this dlperf writes. `MIGRATIONS[i]` takes a database
from version i to i + 1; a database is upgraded one step at a time, each step in
its own transaction. A later change adds a step (ALTER/CREATE) and bumps the
version; it never edits an earlier step, which databases in the field have run.
The steps live in `store.migrations`, each with its own copy of what it needs (not
these tables, which are the current shape: what all the steps together build).
"""

from __future__ import annotations

from collections.abc import Callable

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
)

from dlperf.store.migrations import v0_to_v1, v1_to_v2, v2_to_v3, v3_to_v4

metadata = MetaData()

meta = Table(
    "dlperf_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

environments = Table(
    "environments",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("fingerprint_hash", String(64), nullable=False, unique=True),
    Column("data", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("study", String(128), nullable=False),
    Column("variant", Text, nullable=False),  # v4: Text (VARCHAR(16) before; a maxbatch variant is longer)
    Column("study_hash", String(64), nullable=False),
    Column("study_path", Text, nullable=False),
    Column("filters", JSON, nullable=False),
    Column("settings", JSON, nullable=False),
    Column("env_id", Integer, ForeignKey("environments.id"), nullable=False),
    Column("status", String(16), nullable=False),  # running | complete | interrupted | failed (core.status)
    Column("n_cases", Integer, nullable=False),
    Column("dlperf_version", String(32), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    # v2: what the run's fingerprint held beyond the environment's identity (peaks, overrides, dlperf's
    # version and commit), as it was when the run was created; laid over the environment for reports.
    Column("derived", JSON),
)

results = Table(
    "results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(128), ForeignKey("runs.id"), nullable=False),
    Column("case_key", Text, nullable=False),
    Column("repetition", Integer, nullable=False),
    Column("workload", String(64), nullable=False),
    Column("framework", String(64), nullable=False),
    Column("device", String(32), nullable=False),
    Column("params", JSON, nullable=False),
    Column("status", String(16), nullable=False),  # ok | error | timeout | oom | crashed | unsupported (core.status)
    Column("reason", Text),
    Column("measurement", JSON),  # raw samples + iterations behind each (see Measurement.to_dict)
    Column("metrics", JSON),  # derived: statistics, throughput, FLOP/s, memory
    Column("env_id", Integer, ForeignKey("environments.id"), nullable=False),
    Column("wall_s", Float),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("run_id", "case_key", "repetition", name="uq_result_case"),
    Index("ix_results_run", "run_id"),
)

# v3: the owner of a run being executed (store.leases); no row: nobody is executing the run.
run_leases = Table(
    "run_leases",
    metadata,
    Column("run_id", String(128), ForeignKey("runs.id"), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("pid_started_s", Float, nullable=False),  # the PID's process start time (epoch s), against PID reuse
    Column("acquired_at", DateTime(timezone=True), nullable=False),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
    Column("token", String(64), nullable=False),  # random; every heartbeat, check and release names it
)


Migration = Callable[[Connection], None]

#: MIGRATIONS[i] upgrades version i to i + 1.
MIGRATIONS: list[Migration] = [v0_to_v1, v1_to_v2, v2_to_v3, v3_to_v4]
SCHEMA_VERSION = len(MIGRATIONS)
