"""The fuzz harness's own parts: the per-example time limit breaks a blocking call, the README's exit-code table
is read, and the property refuses what it must (a check that cannot fail would pass any input)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.fuzz.harness import ExampleHung, Outcome, check_outcome, documented_exit_codes, store_digest, time_limit


def test_the_time_limit_breaks_a_blocking_read() -> None:
    r, w = os.pipe()
    start = time.monotonic()
    try:
        with pytest.raises(ExampleHung), time_limit(0.3):
            os.read(r, 1)  # nothing is ever written: blocks until the limit's signal
    finally:
        os.close(r)
        os.close(w)
    assert time.monotonic() - start < 5


def test_the_exit_codes_come_from_the_readme_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("| status | meaning |\n|---|---|\n| 7 | not a code table |\n\n"
                      "| Exit code | meaning |\n|---|---|\n| `0` | done |\n| 2 | bad input |\n| 69 | no database |\n")
    assert documented_exit_codes(readme) == {0, 2, 69}
    readme.write_text("no table here\n")
    assert documented_exit_codes(readme) == {0, 1, 2}


@pytest.mark.parametrize("outcome", [
    Outcome(("x",), 70, "", "dlperf: internal error: ValueError: x\n"),
    Outcome(("x",), 2, "", "dlperf: error: a\nsecond line\n"),
    Outcome(("x",), 2, "", "Traceback (most recent call last):\ndlperf: error: a\n"),
    Outcome(("x",), 0, "", "dlperf: error: said, yet exit 0\n"),
    Outcome(("x",), 3, "", "dlperf: error: an undocumented code\n"),
    Outcome(("x",), 1, "", "no error line\n"),
])
def test_the_property_refuses(outcome: Outcome) -> None:
    with pytest.raises(AssertionError):
        check_outcome(outcome)


def test_a_refusal_that_changed_the_store_fails(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    store.write_bytes(b"before")
    before = store_digest(store)
    refused = Outcome(("x",), 2, "", "dlperf: error: no\n")
    check_outcome(refused, store=store, before=before)
    store.write_bytes(b"after")
    with pytest.raises(AssertionError, match="changed the store"):
        check_outcome(refused, store=store, before=before)
    with pytest.raises(AssertionError, match="changed the store"):  # a store made where there was none
        check_outcome(refused, store=store, before=None)
