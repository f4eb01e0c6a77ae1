"""The fuzz tests' Hypothesis keeps its files (a cache of the source's constants) in the session's temporary
folder, never in the repository or the user's home: tests are hermetic."""

from __future__ import annotations

import pytest
from hypothesis.configuration import set_hypothesis_home_dir


@pytest.fixture(scope="session", autouse=True)
def hypothesis_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
