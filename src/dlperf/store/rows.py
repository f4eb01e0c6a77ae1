"""The store's rows as types: a run (`RunRow`, one per `runs` row), a run as `dlperf runs` lists it
(`ListedRun`), and the environment fingerprint its reports read (`Environment`).

`RunRow` is a frozen dataclass, not a pydantic model: its values come from the store's own columns, already
typed by SQLAlchemy (and checked on the way in: the runner writes them, a bundle's are checked strictly by
`store.bundle.shape`), so nothing is coerced or validated again; a copy with one field changed is
`dataclasses.replace`. Its fields are the `runs` table's columns in the table's order (a test holds them
equal), so `to_dict()` gives the row as the store always gave it: the same keys, in the same order.

`Environment` (`core.environment`, below hardware/ and store/, which both use it) is the fingerprint's stored
JSON, as `Store.environment`/`run_environment` return it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from dlperf.store.leases import Lease


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


__all__ = ["ListedRun", "RunRow", "run_columns"]
