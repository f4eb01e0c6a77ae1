"""The browser harness itself, on small pages written here: a clean page passes every check, and each way a
page can reach out (image, script, CSS url(), fetch) or show nothing is caught, so that the report tests'
"no request" and "not blank" assertions are known to be able to fail."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.browser.harness import assert_not_blank, screenshot_stats

pytestmark = pytest.mark.browser

# A plot as the report inlines it: an <svg> with drawn paths and text, and the page's own script.
CLEAN = """<!doctype html><html><head><meta charset="utf-8"><title>clean</title>
<style>body {{ font-family: sans-serif; margin: 2em; }} td {{ padding: 0 1em; }}</style></head>
<body><h1>A clean page</h1>
<figure><svg xmlns="http://www.w3.org/2000/svg" width="400" height="240" viewBox="0 0 400 240">
<rect x="0" y="0" width="400" height="240" fill="#eef"/>
<path d="M 20 220 L 380 220 M 20 220 L 20 20" stroke="black" stroke-width="2" fill="none"/>
<path d="M 20 200 L 120 150 L 220 90 L 380 40" stroke="#c30" stroke-width="3" fill="none"/>
<line x1="20" y1="120" x2="380" y2="120" stroke="#393" stroke-dasharray="4"/>
<text x="200" y="236" text-anchor="middle">batch size</text></svg></figure>
<table><tr><th>case</th><th>median</th></tr><tr><td>add</td><td>8.1 us</td></tr></table>
<script>{script}</script></body></html>"""
READY = 'document.body.dataset.ready = "1";'


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released): a request there fails at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write(tmp_path: Path, name: str, html: str) -> Path:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return path


def test_a_clean_page_makes_no_request_counts_its_svg_and_is_not_blank(open_page, tmp_path):
    shot = tmp_path / "shots" / "clean.png"
    v = open_page(write(tmp_path, "clean.html", CLEAN.format(script=READY)), screenshot=shot)
    assert v.problems() == []
    assert v.ready and v.ready_by == "dataset.ready"
    assert v.counts["svg"] == 1 and v.counts["svg path"] == 2 and v.counts["svg line"] == 1
    assert v.counts["table"] == 1 and v.counts["tr"] == 2 and v.counts["figure"] == 1
    stats = assert_not_blank(shot)
    assert stats.width == 1280 and stats.colours > 16


def test_a_page_without_script_is_ready_at_its_load_event(open_page, tmp_path):
    html = CLEAN.format(script="").replace("<script></script>", "")
    v = open_page(write(tmp_path, "static.html", html))
    assert v.ready and v.ready_by == "load event" and v.problems() == []
    assert v.counts["script"] == 0


def test_a_script_that_never_says_ready_is_reported(open_page, tmp_path):
    v = open_page(write(tmp_path, "late.html", CLEAN.format(script="let x = 1;")), ready_timeout_s=1.0)
    assert not v.ready and "never set" in v.ready_by
    assert any("not ready" in p for p in v.problems())


@pytest.mark.parametrize("kind", ["img", "script", "css", "fetch"])
def test_each_way_of_reaching_a_host_is_recorded(open_page, tmp_path, kind):
    url = f"http://127.0.0.1:{closed_port()}/{kind}.x"
    extra = {"img": f'<img src="{url}" alt="x">',
             "script": f'<script src="{url}"></script>',
             "css": f"<style>h1 {{ background: url({url}); }}</style>",
             "fetch": f'<script>fetch("{url}").catch(() => {{}});</script>'}[kind]
    html = CLEAN.format(script=READY).replace("<h1>", extra + "<h1>")
    v = open_page(write(tmp_path, f"{kind}.html", html))
    assert v.requests == [url]
    assert len(v.failed_requests) == 1 and v.failed_requests[0].startswith(url)
    assert f"request: {url}" in v.problems()


def test_a_script_error_and_a_console_error_are_recorded(open_page, tmp_path):
    script = 'console.error("drawn wrong"); document.body.dataset.ready = "1"; null.x;'
    v = open_page(write(tmp_path, "err.html", CLEAN.format(script=script)))
    assert v.ready  # the flag was set before the error
    assert v.console_errors == ["drawn wrong"]
    assert len(v.page_errors) == 1 and "null" in v.page_errors[0]


def test_a_probe_reads_the_page_after_its_script_ran(open_page, tmp_path):
    script = 'document.querySelector("h1").textContent = "drawn"; ' + READY
    v = open_page(write(tmp_path, "probe.html", CLEAN.format(script=script)),
                  probe="() => [document.querySelector('h1').textContent, document.querySelector('svg')"
                        ".getBoundingClientRect().width]")
    assert v.probe == ["drawn", 400]


def test_a_blank_page_fails_the_not_blank_check(open_page, tmp_path):
    shot = tmp_path / "blank.png"
    v = open_page(write(tmp_path, "blank.html", "<!doctype html><html><body></body></html>"), screenshot=shot)
    assert v.ready and v.problems() == []
    stats = screenshot_stats(shot)
    assert stats.colours == 1 and stats.ink_fraction == 0.0
    with pytest.raises(AssertionError, match="looks blank"):
        assert_not_blank(shot)


def test_one_word_on_a_white_page_is_still_blank(open_page, tmp_path):
    shot = tmp_path / "word.png"
    open_page(write(tmp_path, "word.html", "<!doctype html><html><body>x</body></html>"), screenshot=shot)
    with pytest.raises(AssertionError, match="looks blank"):
        assert_not_blank(shot)
