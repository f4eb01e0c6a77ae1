"""A page as a person would see it: open a local HTML file in headless Chromium (driven by Playwright), wait
until its own script says it has run, and record what it asked of the network, what it complained about, how
many elements of each kind it drew, and a full-page screenshot.

Chromium is Debian's package (`/usr/bin/chromium`, installed by scripts/ensure_chromium.sh), or the binary
DLPERF_CHROMIUM names; Playwright's own browser download is never used. Every request other than the page
itself is recorded and then aborted, so a page that would reach a host is caught and never reaches it.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Debian's chromium as Playwright must launch it here: no sandbox (containers, root), no GPU, and nothing
#: that phones home on its own (component updates, sync, background networking).
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic")
#: What `open_page` counts by default (CSS selectors).
DEFAULT_SELECTORS = ("svg", "svg path", "svg line", "svg rect", "svg text", "table", "tr", "figure", "img", "script")
READY_JS = "() => document.body !== null && document.body.dataset.ready === '1'"
VIEWPORT = {"width": 1280, "height": 900}


def find_chromium() -> tuple[str | None, str]:
    """(the Chromium binary to launch, "") or (None, why there is none): DLPERF_CHROMIUM where set, else
    /usr/bin/chromium, else `chromium` on PATH; and the Playwright package to drive it."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return None, "the playwright package is not installed: pip install -e '.[dev]'"
    named = os.environ.get("DLPERF_CHROMIUM")
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return named, ""
        return None, f"DLPERF_CHROMIUM={named} is not an executable file"
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate, ""
    return None, ("no Chromium: /usr/bin/chromium and `chromium` on PATH are missing (Debian: apt-get install "
                  "chromium; `make test` runs scripts/ensure_chromium.sh; DLPERF_CHROMIUM=/path names another)")


def launch(playwright: Any, executable: str) -> Any:
    """A headless Chromium browser (a fresh temporary profile, as Playwright's launch gives)."""
    return playwright.chromium.launch(executable_path=executable, headless=True, args=list(CHROMIUM_ARGS))


@dataclass
class PageVisit:
    """What one opening of a page showed."""

    url: str
    #: True when the page's script set body[data-ready="1"] or, for a page with no script, the load event came.
    ready: bool
    #: "dataset.ready", "load event", or what was waited for in vain.
    ready_by: str
    #: Seconds from navigation to ready (or to giving up).
    load_s: float
    #: Every request the page made other than for itself (each aborted, so none reached a host).
    requests: list[str] = field(default_factory=list)
    #: Requests that failed, with Chromium's reason ("URL net::ERR_...").
    failed_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    #: Number of elements matching each CSS selector, after the page's script ran.
    counts: dict[str, int] = field(default_factory=dict)
    screenshot: Path | None = None
    #: What the `probe` JavaScript function returned (None without one).
    probe: Any = None

    def problems(self) -> list[str]:
        """Everything a self-contained, working page must not show, one line each (empty when clean)."""
        out = [f"request: {u}" for u in self.requests]
        out += [f"failed request: {u}" for u in self.failed_requests]
        out += [f"console error: {m}" for m in self.console_errors]
        out += [f"page error: {m}" for m in self.page_errors]
        if not self.ready:
            out.append(f"not ready after {self.load_s:.1f} s: {self.ready_by}")
        return out


def visit(browser: Any, path: Path, *, screenshot: Path | None = None, selectors: Iterable[str] = DEFAULT_SELECTORS,
          probe: str | None = None, ready_timeout_s: float = 15.0) -> PageVisit:
    """Open the local file `path` in a new browser context and record what it did (see PageVisit).

    `probe`, a JavaScript function source such as "() => ...", runs in the page after it is ready; its
    JSON-able result is kept. The screenshot (full page, PNG) is written where `screenshot` says."""
    url = Path(path).resolve().as_uri()
    requests: list[str] = []
    failed: list[str] = []
    console_errors: list[str] = []
    page_errors: list[str] = []
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")

    def route(r: Any) -> None:
        if r.request.url == url:
            r.continue_()
        else:
            r.abort()  # recorded by the "request" listener; it never reaches a host or another file

    context.route("**/*", route)
    try:
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url) if r.url != url else None)
        page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))
        page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        start = time.perf_counter()
        page.goto(url, wait_until="load", timeout=ready_timeout_s * 1000)
        if page.locator("script:not([type]), script[type='text/javascript'], script[type='module']").count():
            ready_by = "dataset.ready"
            try:
                page.wait_for_function(READY_JS, timeout=ready_timeout_s * 1000)
                ready = True
            except Exception as exc:  # a Playwright TimeoutError: the page's script never said it had run
                ready, ready_by = False, f'body[data-ready="1"] never set ({type(exc).__name__})'
        else:
            ready, ready_by = True, "load event"
        load_s = time.perf_counter() - start
        counts = {sel: page.locator(sel).count() for sel in selectors}
        probed = page.evaluate(probe) if probe else None
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        page.wait_for_timeout(50)  # let late failures of aborted requests arrive before the context closes
    finally:
        context.close()
    return PageVisit(url, ready, ready_by, load_s, requests, failed, console_errors, page_errors, counts,
                     screenshot, probed)


@dataclass(frozen=True)
class ScreenshotStats:
    """How much a screenshot shows: its size, distinct colours, and the share of pixels that are not white."""

    width: int
    height: int
    colours: int
    ink_fraction: float


def screenshot_stats(png: Path) -> ScreenshotStats:
    """Decode the PNG (Pillow) and count what is drawn on it."""
    from PIL import Image

    with Image.open(io.BytesIO(Path(png).read_bytes())) as img:
        rgb = img.convert("RGB")
    w, h = rgb.size
    colours = rgb.getcolors(maxcolors=w * h) or []
    white = sum(n for n, c in colours if min(c) >= 250)
    return ScreenshotStats(w, h, len(colours), 1.0 - white / (w * h))


def assert_not_blank(png: Path, *, min_colours: int = 16, min_ink_fraction: float = 0.01) -> ScreenshotStats:
    """Fail unless the screenshot shows something: at least `min_colours` distinct colours (antialiased text
    and lines give dozens) and at least `min_ink_fraction` of its pixels not white."""
    stats = screenshot_stats(png)
    assert stats.colours >= min_colours and stats.ink_fraction >= min_ink_fraction, (
        f"screenshot {png} looks blank: {stats.colours} colours (want >= {min_colours}), "
        f"{stats.ink_fraction:.2%} of pixels not white (want >= {min_ink_fraction:.2%}), {stats.width}x{stats.height}")
    return stats


def render_png(page: Path, png: Path, *, ready_timeout_s: float = 30.0) -> PageVisit:
    """Open `page` in a browser of its own and write its full-page screenshot to `png` (for
    scripts/report_screenshot.py)."""
    from playwright.sync_api import sync_playwright

    executable, why = find_chromium()
    if executable is None:
        raise RuntimeError(why)
    with sync_playwright() as pw:
        browser = launch(pw, executable)
        try:
            return visit(browser, page, screenshot=png, ready_timeout_s=ready_timeout_s)
        finally:
            browser.close()
