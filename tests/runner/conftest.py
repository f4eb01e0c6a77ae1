"""Fixtures of the runner tests: a new store on SQLite and on the suite's PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.postgres_server import new_database


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for a new store: a SQLite file, or a new database on the suite's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite'}"
    return new_database(request.getfixturevalue("postgres_url"))
