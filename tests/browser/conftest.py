"""Fixtures of the browser tests: one headless Chromium for the whole session, and `open_page(path)`.

Without Chromium (or Playwright) the tests are skipped with the reason, unless DLPERF_REQUIRE_CHROMIUM=1 (set
by `make test`, which installs Debian's chromium where it is missing: scripts/ensure_chromium.sh): then they
fail, so that CI never passes by skipping them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.browser.harness import PageVisit, find_chromium, launch, visit
from tests.requirements import unavailable

OpenPage = Callable[..., PageVisit]


def _unavailable(reason: str) -> NoReturn:
    """Skip with the reason; fail instead where DLPERF_REQUIRE_CHROMIUM=1 (CI must not skip these)."""
    unavailable(reason, "DLPERF_REQUIRE_CHROMIUM")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium (Playwright's Browser), launched once per session."""
    executable, why = find_chromium()
    if executable is None:
        _unavailable(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        try:
            b = launch(pw, executable)
        except Exception as exc:  # a binary that does not start is as good as none: say why
            _unavailable(f"Chromium at {executable} did not start: {str(exc).splitlines()[0]}")
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def open_page(browser: Any, tmp_path: Path) -> OpenPage:
    """`open_page(path, screenshot=None, **kw) -> PageVisit`: the page opened in the session's browser; the
    full-page screenshot goes to `screenshot`, by default tmp_path/<page name>.png."""

    def call(path: Path, screenshot: Path | None = None, **kw: Any) -> PageVisit:
        shot = screenshot or tmp_path / f"{Path(path).stem}.png"
        return visit(browser, Path(path), screenshot=shot, **kw)

    return call
