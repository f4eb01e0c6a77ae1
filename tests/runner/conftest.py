"""Fixtures of the runner tests: a new store on SQLite and on the suite's PostgreSQL server; workloads whose
build fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.postgres_server import new_database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for a new store: a SQLite file, or a new database on the suite's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return new_database(request.getfixturevalue("postgres_url"))


def builds_fail_with(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Every workload the worker gets (`dlperf.workloads.get_workload`) raises `error` from its build, as a build
    that imports a library or compiles a graph can; the rest of each workload is the real one."""
    import dlperf.workloads as workloads

    real = workloads.get_workload

    class Failing:
        def __init__(self, name: str) -> None:
            self._real = real(name)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)

        def build(self, *args: Any) -> Any:
            raise error

    monkeypatch.setattr(workloads, "get_workload", Failing)
