"""The HTML report as a person sees it: `dlperf report RUN --format html -o page.html` on real runs, opened
from disk in headless Chromium. Each page must make no request at all (every script, style, font, plot and
datum inline), show no console or script error, run its own script to the end (body[data-ready="1"]), draw
every figure as an inline <svg> with drawn elements, hold the verdict table and the raw data as JSON, and not
look blank. Three runs: a CPU-only ops run on numpy (its verdicts `cannot check here` where a GPU is needed), a
run of every failure mode (tests/studies/faults.yaml), and a synthetic run of 1,000 cases (load time and size
bounded).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dlperf.claims import CANNOT_CHECK, VERDICTS
from tests.browser.harness import PageVisit, assert_not_blank
from tests.conftest import STUDIES, run_cli
from tests.factories import case

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

#: Failed statuses a page must name where the run has such cases.
FAILED = ("error", "crashed", "timeout", "oom")
#: What a page probe reports: per <figure>, its inline SVGs, their drawn elements and on-screen boxes; the rows
#: of every table whose header names a verdict; the embedded data (its type, whether it parses) and, among the
#: case keys KEYS, those it does not hold; the page's visible text.
PROBE = """() => {
  const drawn = "path, line, polyline, polygon, rect, circle, ellipse, use";
  const figures = [...document.querySelectorAll("figure")].map(f => ({
    label: f.getAttribute("aria-label") || (f.querySelector("figcaption") || {}).textContent || "",
    svgs: f.querySelectorAll("svg").length,
    drawn: [...f.querySelectorAll("svg")].map(s => s.querySelectorAll(drawn).length),
    boxes: [...f.querySelectorAll("svg")].map(s => {
      const r = s.getBoundingClientRect();
      return [r.width, r.height];
    }),
  }));
  const verdictTables = [...document.querySelectorAll("table")].filter(
    t => [...t.querySelectorAll("th")].some(th => /verdict/i.test(th.textContent)));
  const verdictRows = verdictTables.map(t => [...t.querySelectorAll("tbody tr")].map(tr => tr.innerText));
  const data = document.getElementById("dlperf-data");
  let parsed = null, parseError = null;
  try { parsed = data ? JSON.parse(data.textContent) : null; } catch (e) { parseError = String(e); }
  const flat = parsed === null ? "" : JSON.stringify(parsed);
  return {figures, verdictRows, dataType: data ? data.type : null, dataChars: data ? data.textContent.length : 0,
          parsed: parsed !== null, parseError, missingKeys: KEYS.filter(k => !flat.includes(k)),
          text: document.body.innerText};
}"""


def report_html(db: Path, run_ref: str, page: Path) -> Path:
    """`dlperf report RUN --format html -o PAGE` as a user runs it: exit 0, nothing on stderr, the file written."""
    res = run_cli("report", run_ref, "--format", "html", "-o", str(page), db=db)
    assert res.returncode == 0 and res.stderr == "", f"dlperf report --format html failed: {res.stderr or res.stdout}"
    assert page.is_file() and page.stat().st_size > 0
    return page


def run_study(db: Path, study: str, *options: str) -> str:
    """`dlperf run STUDY [OPTIONS]` into `db`; the id of the run it stored."""
    from dlperf.store import Store

    res = run_cli("run", str(STUDIES / study), *options, db=db)
    assert res.returncode == 0, res.stderr
    return Store(db).resolve_run("latest")


def case_keys(db: Path, run_id: str) -> list[str]:
    from dlperf.store import Store

    return sorted({r.case_key for r in Store(db).results(run_id)})


def open_report(open_page: Any, page: Path, keys: list[str], shot: Path, ready_timeout_s: float = 15.0) -> PageVisit:
    return open_page(page, screenshot=shot, probe=PROBE.replace("KEYS", json.dumps(keys), 1),
                     ready_timeout_s=ready_timeout_s)


def assert_works(v: PageVisit, *, min_figures: int) -> dict[str, Any]:
    """The checks every report page must pass; the probe's findings for more."""
    assert v.requests == [], f"the page asked for {v.requests}"
    assert v.problems() == [], "\n".join(v.problems())
    assert v.ready and v.ready_by == "dataset.ready"
    p = v.probe
    assert len(p["figures"]) >= min_figures, f"{len(p['figures'])} figures, want >= {min_figures}"
    for fig in p["figures"]:
        assert fig["svgs"] >= 1, f"figure {fig['label']!r} has no inline <svg>"
        assert all(n >= 5 for n in fig["drawn"]), f"figure {fig['label']!r}: drawn elements per svg {fig['drawn']}"
        assert all(w > 100 and h > 50 for w, h in fig["boxes"]), f"figure {fig['label']!r} boxes {fig['boxes']}"
    assert v.counts["svg path"] + v.counts["svg line"] >= 5 * len(p["figures"])
    assert p["verdictRows"] and p["verdictRows"][0], "no verdict table (a <table> with a 'verdict' header and rows)"
    for row in p["verdictRows"][0]:
        assert any(word in row for word in VERDICTS), f"a verdict row without a verdict: {row!r}"
    assert p["dataType"] == "application/json" and p["parsed"], f"embedded data: {p['parseError'] or 'missing'}"
    assert p["missingKeys"] == [], f"case keys missing from the embedded data: {p['missingKeys'][:5]}"
    assert v.screenshot is not None
    assert_not_blank(v.screenshot)
    return p


@pytest.fixture(scope="module")
def ops_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real run of tests/studies/ops_tiny.yaml on numpy (4 cases on the CPU; a roofline figure).

    The page a browser loads is drawn from stored results alike for every framework; numpy's workers skip torch's
    import (about 11 s of CPU less than both frameworks' 8 cases). The 1,000-case run below holds both frameworks."""
    db = tmp_path_factory.mktemp("ops") / "r.sqlite"
    return db, run_study(db, "ops_tiny.yaml", "--framework", "numpy")


def test_the_report_of_an_ops_run_works_offline(open_page, ops_run, tmp_path):
    db, run_id = ops_run
    page = report_html(db, run_id, tmp_path / "page.html")  # not "latest": the 1,000-case test adds a run to this store
    text = page.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    assert len(text.encode()) < 5 * 2**20
    p = assert_works(open_report(open_page, page, case_keys(db, run_id), tmp_path / "ops.png"), min_figures=1)
    assert run_id in p["text"]
    from tests.conftest import has_cuda

    if not has_cuda():  # a claim that needs a GPU cannot be checked on this machine, and says so
        assert any(CANNOT_CHECK in row for row in p["verdictRows"][0])


def test_the_report_of_a_run_with_failed_cases_works_and_names_them(open_page, tmp_path_factory, tmp_path):
    db = tmp_path_factory.mktemp("faults") / "r.sqlite"
    run_id = run_study(db, "faults.yaml")
    from dlperf.store import Store

    failed = sorted({r.status for r in Store(db).results(run_id) if r.status in FAILED})
    assert failed, "the faults study stored no failed case"
    page = report_html(db, run_id, tmp_path / "faults.html")
    p = assert_works(open_report(open_page, page, case_keys(db, run_id), tmp_path / "faults.png"), min_figures=0)
    for status in failed:
        assert status in p["text"], f"the page never names the {status!r} cases"


# A synthetic run of 1,000 ops cases, stored beside the real ops run (same environment): 2 frameworks x 5
# element-wise ops x 100 sizes. Its per-call times are drawn, seeded, from a simple memory-bound model (50 GB/s
# plus 2 us per call, 5% log-normal noise); they exist only to load the page with 1,000 cases.
MANY_SIZES_MB = np.geomspace(0.01, 64, 100)
MANY_OPS = ("add", "mul", "scalar", "sigmoid", "tanh")
#: Upper bounds for the 1,000-case page: Chromium must have run its script within this many seconds ...
MANY_LOAD_S = 20.0
#: ... and the file must stay under this size.
MANY_BYTES = 20 * 2**20


def store_many(db: Path, like_run: str) -> tuple[str, list[str]]:
    """The synthetic 1,000-case run (see above) in the environment of `like_run`; its id and case keys."""
    from dlperf.core.result import Metrics, derive_rates
    from dlperf.core.validity import assess
    from dlperf.store import Store
    from dlperf.timing.measurement import Measurement
    from dlperf.workloads.ops.spec import cost, shape_for

    store = Store(db)
    env_id = store.results(like_run)[0].env_id
    combos = [(fw, op, round(float(mb), 4)) for fw in ("numpy", "torch") for op in MANY_OPS for mb in MANY_SIZES_MB]
    run_id = store.create_run(study="many_synthetic", variant="full", study_hash="synthetic",
                              study_path="tests/browser/test_report_page.py", filters={}, settings={},
                              env_id=env_id, n_cases=len(combos), dlperf_version="test")
    rng = np.random.default_rng(1000)
    keys = []
    for fw, op, mb in combos:
        c = cost(op, shape_for(op, mb, "float32"), "float32")
        per_call_s = 2e-6 + (c.bytes_moved or 0.0) / 50e9
        samples = list(per_call_s * rng.lognormal(0.0, 0.05, 20))
        key = f"ops/{fw}/cpu/dtype=float32,op={op},size_mb={mb}"
        keys.append(key)
        measurement = {"sample_times_s": samples, "sample_iters": [1] * len(samples)}
        m = Measurement.from_dict(measurement)
        validity, why = assess(m, None, threads=2, device="cpu")  # as the runner stores them
        metrics = Metrics(**derive_rates(m.summary(), c.samples, c.flops, c.bytes_moved), threads=2, device="cpu",
                          validity=validity, validity_reason=why)
        store.add_result(case(key, run_id=run_id, framework=fw, params={"op": op, "size_mb": mb, "dtype": "float32"},
                              measurement=measurement, metrics=metrics, env_id=env_id))
    store.set_run_status(run_id, "complete")
    return run_id, keys


def test_the_report_of_1000_cases_loads_within_bounds(open_page, ops_run, tmp_path, record_property):
    db, real_run = ops_run
    run_id, keys = store_many(db, real_run)
    assert len(keys) == 1000 == len(set(keys))
    start = time.perf_counter()
    page = report_html(db, run_id, tmp_path / "many.html")
    write_s = time.perf_counter() - start
    size = page.stat().st_size
    v = open_report(open_page, page, keys, tmp_path / "many.png", ready_timeout_s=MANY_LOAD_S)
    record_property("many_cases_page_bytes", size)
    record_property("many_cases_report_s", round(write_s, 2))
    record_property("many_cases_load_s", round(v.load_s, 2))
    assert size < MANY_BYTES, f"1,000-case page is {size / 2**20:.1f} MiB"
    assert_works(v, min_figures=1)
    assert v.load_s < MANY_LOAD_S
