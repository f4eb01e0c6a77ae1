"""`dlperf report RUN [RUN...] --format html` as a user runs it: a real tiny run measured here (no GPU on this
machine, or not used by it), the golden store's real runs (failed cases of every kind, the quick smoke study,
eight runs on one page); the page names no web address, loads nothing, holds every part and every case."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dlperf.report.html.embed import extract
from tests.cli.conftest import assert_one_line_error
from tests.conftest import STUDIES, run_cli
from tests.golden.render import RUNS, STORE

pytestmark = pytest.mark.e2e

PARTS = ("summary", "verdicts", "results", "study", "samples", "flags", "env", "reproduce", "data")


def check_self_contained(page: str) -> None:
    """No http:// or https:// anywhere in the file, no <link>, every src= a data: URI, our script's flag."""
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page.lower()
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', page))
    assert page.count("<script") == 2 and 'document.body.dataset.ready = "1"' in page


def check_parts(page: str, n_runs: int) -> None:
    for i in range(1, n_runs + 1):
        for part in PARTS:
            anchor = part if part in ("summary", "verdicts", "data") else f"run-{i}-{part}"
            assert f'id="{anchor}"' in page, anchor


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with one real run of tests/studies/ops_tiny.yaml on numpy only (its 4 cases); its id.

    The page is the same code whatever the framework (its roofline, box plots, parts and embedded data are drawn
    from the stored results); numpy's workers skip torch's import (~11 s less CPU than both frameworks' 8 cases),
    and the filter shows in the reproduce line the page must print."""
    db = tmp_path_factory.mktemp("html") / "s.sqlite"
    res = run_cli("run", str(STUDIES / "ops_tiny.yaml"), "--framework", "numpy", "--budget", "0.1", db=db)
    assert res.returncode == 0, res.stderr
    (run_id,) = re.findall(r"results: run (\S+) in", res.stdout)
    return db, run_id


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("golden") / "store.sqlite"
    shutil.copy(STORE, db)
    return db


def test_a_real_run_makes_a_self_contained_page(tiny: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = tiny
    out = tmp_path / "r" / "page.html"
    res = run_cli("report", "latest", "--format", "html", "-o", str(out), db=db)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \(\d[\d,]* KB\)\n", res.stdout), res.stdout
    page = out.read_text()
    check_self_contained(page)
    check_parts(page, 1)
    assert "<svg" in page and "roofline" in page.lower() and "Study 002 layout" in page
    assert "ops on cpu: per-call time of every sample" in page  # the box plots of the raw samples
    doc = extract(page)
    stored = extract(page)["runs"][0]["results"]
    assert doc["runs"][0]["run"]["id"] == run_id and len(stored) == 4  # add and dot at 1 and 4 MB
    assert all(r["measurement"]["sample_times_s"] for r in stored) and {r["framework"] for r in stored} == {"numpy"}
    # the study path as given, and the framework filter the run had
    assert f"dlperf run {STUDIES / 'ops_tiny.yaml'} --framework numpy --budget 0.1 --new" in page
    print(f"\nops_tiny page: {len(page.encode()) / 1024:.0f} KB")


def test_the_default_file_is_reports_run_html(tiny: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = tiny
    res = run_cli("report", run_id, "--format", "html", db=db, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"wrote reports/{run_id}.html (")
    assert (tmp_path / "reports" / f"{run_id}.html").is_file()
    assert not (tmp_path / "reports" / run_id).exists()  # plots inlined; kept only with --plot-dir


def test_failed_cases_render_with_their_statuses_and_reasons(golden: Path, tmp_path: Path) -> None:
    out = tmp_path / "faults.html"
    res = run_cli("report", "faults-20261122-203705-263c", "--format", "html", "-o", str(out), "--db", str(golden))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    check_self_contained(page)
    for status in ("error", "crashed", "timeout", "oom", "unsupported"):
        assert f'<tr class="st-{status}">' in page, status
    for reason in ("ValueError: deliberate failure from the faults workload", "worker exited with code 3",
                   "no result within the 8 s time-out"):
        assert reason in page, reason
    assert "no GPU" in page  # the golden runs were measured on a machine without one


def test_the_quick_smoke_page_is_well_under_five_mb_and_leads_with_its_results(golden: Path, tmp_path: Path) -> None:
    """The smoke run (ops cases only, no GPU): its results come first; the ops claims (not checkable without a
    GPU, and saying so) and the catalog's stay in view; the 11 claims on studies it does not include are folded
    under one line naming the commands that would check them."""
    out = tmp_path / "smoke.html"
    res = run_cli("report", "smoke-20261122-203532-fdee", "--format", "html", "-o", str(out), "--db", str(golden))
    assert res.returncode == 0, res.stderr
    size = out.stat().st_size
    print(f"\nquick smoke page: {size / 1024:.0f} KB")
    assert size < 5 * 1024 * 1024
    page = out.read_text()
    assert extract(page)["runs"][0]["run"]["variant"] == "quick"
    assert page.index('id="run-1-results"') < page.index('id="verdicts"')
    shown, folded = page.split('<details class="fold">')
    for claim in ("002-elementwise-under-1pct", "002-dot-35-to-89pct", "004-datasheet-gpus"):
        assert f'<td class="text">{claim}</td>' in shown, claim
    assert "000-gpu-speedup-tensors-large" not in shown and "001-tf-faster-cpu" not in shown
    assert ("<summary>11 claims on mlp, cnn, backends, studies this run does not include: cannot check here; "
            "<code>dlperf run mlp</code>, <code>dlperf run cnn</code>, <code>dlperf run backends</code> would check "
            "them") in folded
    assert folded.split("</details>")[0].count('<tr class="verdict-cannot">') == 11


def test_several_runs_make_one_page(golden: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.html"
    res = run_cli("report", *RUNS, "--format", "html", "-o", str(out), "--db", str(golden))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    check_self_contained(page)
    check_parts(page, len(RUNS))
    assert [r["run"]["id"] for r in extract(page)["runs"]] == list(RUNS)


def test_several_runs_are_html_only(dlperf_main, golden: Path) -> None:
    res = dlperf_main("report", RUNS[0], RUNS[1], "--format", "markdown", db=golden)
    assert_one_line_error(res, "--format markdown reports one RUN", "--format html")
    assert res.returncode == 2
