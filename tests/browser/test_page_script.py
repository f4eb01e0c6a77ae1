"""The page's own script, clicked as a reader would: a numeric column sorts by value with its unit (ns < us <
ms < s), a second click reverses it, text columns sort as text, and a table longer than the fold limit shows
its first rows and a button that shows the rest."""

from __future__ import annotations

import pytest

from dlperf.report.html import render_sections_page
from dlperf.report.html.render import COLLAPSE_ROWS
from dlperf.report.sections import Table

pytestmark = [pytest.mark.browser]

PROBE = """() => {
  const [small, long] = document.querySelectorAll("table");
  const col = (t, i) => [...t.tBodies[0].rows].map(r => r.cells[i].textContent.trim());
  const head = (t, i) => t.tHead.rows[0].cells[i];
  const before = col(small, 1);
  head(small, 1).click();
  const up = col(small, 1);
  head(small, 1).click();
  const down = col(small, 1);
  head(small, 0).click();
  const names = col(small, 0);
  const visible = t => [...t.tBodies[0].rows].filter(r => r.offsetParent !== null).length;
  const folded = visible(long);
  const button = document.querySelector("button.more");
  button.click();
  return {before, up, down, names, folded, all: visible(long), label: button.textContent};
}"""


def test_sorting_and_folding_work_in_the_browser(open_page, tmp_path):
    times = [["case c", "2 ms"], ["case a", "950 ns"], ["case b", "1.5 s"], ["case d", "40 us"]]
    many = [[f"row {i}", str(i)] for i in range(COLLAPSE_ROWS + 10)]
    page = tmp_path / "p.html"
    page.write_text(render_sections_page("script test", [("tables", [Table("t", ["case", "median"], times),
                                                                      Table("u", ["row", "n"], many)])], {}))
    v = open_page(page, probe=PROBE)
    assert v.problems() == [], v.problems()
    p = v.probe
    assert p["before"] == ["2 ms", "950 ns", "1.5 s", "40 us"]
    assert p["up"] == ["950 ns", "40 us", "2 ms", "1.5 s"]
    assert p["down"] == ["1.5 s", "2 ms", "40 us", "950 ns"]
    assert p["names"] == ["case a", "case b", "case c", "case d"]
    assert p["folded"] == COLLAPSE_ROWS and p["all"] == COLLAPSE_ROWS + 10
    assert p["label"].startswith("show the first")
