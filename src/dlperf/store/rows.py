"""The store's rows as types: a run (`RunRow`, one per `runs` row), a run as `dlperf runs` lists it
(`ListedRun`), and the environment fingerprint its reports read (`Environment`).

`RunRow` is a frozen dataclass, not a pydantic model: its values come from the store's own columns, already
typed by SQLAlchemy (and checked on the way in: the runner writes them, a bundle's are checked strictly by
`store.bundle.shape`), so nothing is coerced or validated again; a copy with one field changed is
`dataclasses.replace`. Its fields are the `runs` table's columns in the table's order (a test holds them
equal), so `to_dict()` gives the row as the store always gave it: the same keys, in the same order.

`Environment` is the fingerprint's stored JSON (`hardware.identity.fingerprint` builds it; a run's derived
figures are laid over it by `Store.run_environment`). It stays a dict (a `TypedDict`): JSON output and
bundles write it as it is stored, and every key may be missing (an old store's fingerprint has fewer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypedDict

from dlperf.store.leases import Lease


class Environment(TypedDict, total=False):
    """An environment's fingerprint as stored (identity and derived fields), with a run's derived figures laid
    over it where it is a run's (`Store.run_environment`). The nested records are typed where they are made
    (`hardware`: `FingerprintGpu`, `DevicePeaks`; `runner.ceilings_record`), above the store."""

    # identity (hardware.identity.IDENTITY_KEYS)
    machine_label: str
    cpu_model: str
    cpu_flags: list[str]
    cpu_physical_cores: int
    cpu_logical_cores: int | None
    threads: int
    ram_bytes: int
    os: str
    kernel: str
    machine: str
    python: str
    hostname_sha256: str
    gpus: list[dict[str, Any]]
    frameworks: dict[str, dict[str, Any]]
    # derived: recorded with each run, never hashed
    gpu_source: str
    cpu_peaks_theoretical: dict[str, Any]
    cpu_clock_probe: dict[str, Any]
    peaks_overrides: dict[str, str]
    dlperf_version: str
    dlperf_git_commit: str | None
    # a run's own derived figures (runner.sweep): how its thread count was chosen, its measured ceilings
    threads_source: dict[str, Any]
    ceilings: dict[str, Any]


@dataclass(frozen=True)
class RunRow:
    """One `runs` row (store.schema.runs): a run of a study, its settings, its environment and its status."""

    id: str
    study: str
    variant: str
    study_hash: str
    study_path: str
    filters: dict[str, Any]
    settings: dict[str, Any]
    env_id: int
    status: str  # core.status.RunStatus: running | complete | interrupted | failed
    n_cases: int
    dlperf_version: str
    started_at: datetime
    finished_at: datetime | None = None
    #: Since schema version 2: the run's fingerprint beyond its environment's identity (None in a v1 row).
    derived: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> RunRow:
        """A row as SQLAlchemy gives it (`.mappings()`): the runs columns, anything else left out."""
        names = run_columns()
        return cls(**{k: row[k] for k in names if k in row})

    def to_dict(self) -> dict[str, Any]:
        """The row as a dict: the runs columns, in the table's order (what `Store.run` gave before it was typed;
        JSON output and bundles write it so)."""
        return {name: getattr(self, name) for name in run_columns()}


@dataclass(frozen=True)
class ListedRun(RunRow):
    """A run as `Store.list_runs` gives it: its row, how many of its cases are stored and how many of them
    are ok, and who executes it (None: nobody)."""

    n_done: int | None = None  # None: no result stored yet
    n_ok: int | None = None
    lease: Lease | None = None


def run_columns() -> tuple[str, ...]:
    """`RunRow`'s fields: the runs table's columns, in order."""
    return tuple(f.name for f in fields(RunRow))


__all__ = ["Environment", "ListedRun", "RunRow", "run_columns"]
