"""`dlperf history` and `dlperf matrix` as HTML pages, opened from disk in headless Chromium: no request, no
error, their own script run to the end, every history figure an inline <svg> with drawn elements, both machines
of a two-machine store shown apart, and the screenshot not blank."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.hardware.identity import machine_id
from dlperf.store import Store
from tests.browser.harness import assert_not_blank
from tests.conftest import run_cli
from tests.history_store import KEY, STUDY, add_run, environment

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PROBE = """() => ({
  figures: [...document.querySelectorAll("figure")].map(f => [...f.querySelectorAll("svg")].map(
      s => s.querySelectorAll("path, line, polyline, rect, use").length)),
  text: document.body.innerText,
})"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two machines: m1 with 6 runs and a 30% step at its fifth, m2 with 3 flat runs."""
    db = tmp_path_factory.mktemp("fleet") / "f.sqlite"
    store = Store(db)
    for i in range(6):
        add_run(store, i, {KEY.format(1): 1e-3 * (1.3 if i >= 4 else 1.0), KEY.format(2): 2e-3}, seed=i)
    for i in range(3):
        add_run(store, 20 + i, {KEY.format(1): 3e-3}, seed=20 + i, machine="m2")
    return db


@pytest.mark.parametrize("command", ["history", "matrix"])
def test_history_and_matrix_pages_work_offline(open_page, fleet, tmp_path, command):
    page = tmp_path / f"{command}.html"
    res = run_cli(command, STUDY, "--format", "html", "-o", str(page), db=fleet)
    assert res.returncode == 0, res.stderr
    v = open_page(page, screenshot=tmp_path / f"{command}.png", probe=PROBE)
    assert v.requests == [], f"the page asked for {v.requests}"
    assert v.problems() == [], "\n".join(v.problems())
    assert v.ready and v.ready_by == "dataset.ready"
    figures = v.probe["figures"]
    if command == "history":
        assert len(figures) >= 2  # a figure per machine's case group
        assert all(svgs and all(n >= 5 for n in svgs) for svgs in figures), figures
    for m in ("m1", "m2"):
        assert machine_id(environment(m)) in v.probe["text"]
    assert_not_blank(v.screenshot)
