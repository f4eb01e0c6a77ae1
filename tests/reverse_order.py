"""An opt-in pytest plugin that runs each test module's tests in reverse order (the modules keep theirs): a test
that passes only after another has run fails under it. Not part of `make test`; run it now and then:

    .venv/bin/python -m pytest -p tests.reverse_order -n 3 --dist loadfile -m "not alone"

What it found: docs/development.md."""

from __future__ import annotations

import itertools

import pytest


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    ordered: list[pytest.Item] = []
    for _, group in itertools.groupby(items, key=lambda item: item.nodeid.split("::")[0]):
        ordered.extend(reversed(list(group)))
    items[:] = ordered
