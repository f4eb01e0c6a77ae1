"""The HTML report of a `dlperf bench` run as a person sees it: `dlperf report RUN --format html` opened from disk
in headless Chromium shows the model section (its heading, the table of path x batch with each path's
correctness and ratio to the reference, the gate's notes) and draws the latency-against-batch figure inline,
with no request, console or script error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.harness import assert_not_blank
from tests.browser.test_report_page import report_html
from tests.conftest import run_cli

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
#: The page's figures (inline SVGs and their drawn elements), its tables' header cells and body rows, its text.
PROBE = """() => {
  const drawn = "path, line, polyline, polygon, rect, circle, ellipse, use";
  const figures = [...document.querySelectorAll("figure")].map(f => ({
    text: f.innerText,
    drawn: [...f.querySelectorAll("svg")].map(s => s.querySelectorAll(drawn).length),
  }));
  const tables = [...document.querySelectorAll("table")].map(t => ({
    header: [...t.querySelectorAll("th")].map(th => th.innerText.trim()),
    rows: [...t.querySelectorAll("tbody tr")].map(tr => [...tr.querySelectorAll("td")].map(td => td.innerText.trim())),
  }));
  return {figures, tables, text: document.body.innerText};
}"""


def test_the_report_of_a_bench_run_shows_the_model_section(open_page, tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    source = f"{REPO}/examples/mlp.py:build"
    res = run_cli("bench", source, "--input", "x:float32[B,256]", "--framework", "torch", "--framework",
                  "onnxruntime", "--batch", "1", "--batch", "2", "--budget", "0.2", db=db, timeout=300)
    assert res.returncode == 0, res.stderr
    page = report_html(db, "latest", tmp_path / "bench.html")
    v = open_page(page, screenshot=tmp_path / "bench.png", probe=PROBE)
    assert v.requests == [] and v.problems() == [], "\n".join(v.problems())
    assert v.ready
    text = " ".join(v.probe["text"].split())
    label = f"{source} (infer)"
    assert "Your model" in text and f"Model: {label}" in text
    assert "correctness: each path's outputs on fixed seeded inputs against the eager fp32 torch reference" in text
    table = next(t for t in v.probe["tables"] if "correctness" in t["header"] and "vs reference" in t["header"])
    col = {name: i for i, name in enumerate(table["header"])}
    rows = {(r[col["framework"]], r[col["batch"]]): r for r in table["rows"]}
    assert set(rows) == {(fw, b) for fw in ("torch", "onnxruntime") for b in ("1", "2")}, rows
    for (fw, _), row in rows.items():
        assert row[col["correctness"]] == ("reference" if fw == "torch" else "pass"), row
        ratio = row[col["vs reference"]]
        assert ratio == "reference" if fw == "torch" else ("x (" in ratio and ratio[0].isdigit()), row
        assert row[col["median"]] not in ("", "-")
    plots = [f for f in v.probe["figures"] if "batch" in f["text"].lower() and "latency" in f["text"].lower()]
    assert plots and all(n >= 5 for f in plots for n in f["drawn"]), v.probe["figures"]
    assert v.screenshot is not None
    assert_not_blank(v.screenshot)
