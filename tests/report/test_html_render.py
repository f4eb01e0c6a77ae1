"""The HTML report from hand-made data: sections drawn as HTML, figures inlined with no web address, every
stored string escaped (a `<script>` in an error, a reason, a study path or an environment stays text), the
verdicts table coloured by verdict (and a page with none), the raw data JSON that parses back whole, and a
synthetic 1,000-case run (its size and render time printed)."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dlperf.core.result import CaseResult, Metrics
from dlperf.report.html import render_html, render_page
from dlperf.report.html.commands import run_command
from dlperf.report.html.embed import extract
from dlperf.report.html.parts import findings
from dlperf.report.html.svg import inline_svg
from dlperf.report.plots import _pyplot, save_figure
from dlperf.report.plots.samples import MAX_BOXES
from dlperf.report.sections import Figure, Heading, Note, Table
from dlperf.report.study import ReportData
from dlperf.report.verdict import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS, Verdict
from dlperf.store.rows import RunRow
from tests import factories
from tests.factories import case, report_data

XSS = "<script>alert(1)</script>"
CLOSE = "</script><b>x</b>"


def result(key: str, times: list[float] | None, status: str = "ok", reason: str | None = None,
           validity: str | None = "valid", validity_reason: str | None = None, rep: int = 0) -> CaseResult:
    """A stored case with these raw per-call times (one call per sample); a workload with no study report."""
    metrics = Metrics(validity=validity, validity_reason=validity_reason) if status == "ok" else Metrics()
    return case(f"synthetic/numpy/cpu/{key}", run_id="r1", workload="synthetic", params={"case": key}, status=status,
                reason=reason, times_s=times, metrics=metrics, rep=rep)


def samples(scale: float, seed: int, n: int = 30) -> list[float]:
    return list(scale * np.random.default_rng(seed).lognormal(0.0, 0.05, n))


def run_row(run_id: str = "r1", study_path: str = "studies/x.yaml", n_cases: int = 1) -> RunRow:
    return factories.run_row(
        run_id, study="synthetic", study_hash="abc", study_path=study_path,
        filters={"frameworks": ["numpy"], "devices": [], "overrides": {"timeout_s": 30.0, "threads": 2}},
        settings={"threads": 2}, n_cases=n_cases, dlperf_version="0.1.0", started_at=datetime(2026, 1, 2, 3, 4, 5),
        finished_at=datetime(2026, 1, 2, 3, 5, 5), derived={})


def data_of(results: list[CaseResult], tmp_path: Path, run: RunRow | None = None,
            env: dict | None = None) -> ReportData:
    env = env if env is not None else {"cpu_model": "Test CPU", "gpus": [], "frameworks": {"numpy": {"version": "2"}}}
    return report_data(results, run=run or run_row(n_cases=len(results)), env=env, plot_dir=tmp_path / "plots")


def test_sections_become_a_sortable_table_paragraphs_headings_and_lists() -> None:
    html = render_html([Heading("## Largest batch", intro="the `largest` batch that **fits**"),
                        Table("t", ["case", "median"], [["a", "1.5 ms"], ["b", "800 us"]], heading="### Times"),
                        Note("terminal only", markdown=""), Note("- one", markdown="- one"), Note("- two")])
    assert '<h3>Largest batch</h3>' in html and "<code>largest</code>" in html and "<strong>fits</strong>" in html
    assert '<table class="sortable" data-fold="25">' in html and '<th class="num"' in html and "<h4>Times</h4>" in html
    assert "terminal only" not in html  # the terminal's note: Markdown (and HTML) leave it out
    assert re.search(r"<ul><li>one</li><li>two</li></ul>", html)


def test_a_figure_is_its_svg_inlined_without_any_web_address(tmp_path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], "o-", label=XSS)
    ax.set_title(f"title {XSS}")
    ax.legend()
    paths = save_figure(fig, tmp_path, "f")
    raw = paths[1].read_text()
    assert "http://" in raw and "<text" in raw  # matplotlib's own file names the W3C; svg.fonttype none: text
    html = render_html([Figure(paths, "alt text", heading="## A plot")])
    assert "<svg" in html and "<img" not in html
    for banned in ("http://", "https://", "<?xml", "<!DOCTYPE", "<metadata", "xmlns", "xlink:", XSS):
        assert banned not in html, banned
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert ids and all(i.startswith("fig") for i in ids)
    refs = re.findall(r'(?:href="#|url\(#)([^")]+)', html)
    assert refs and set(refs) <= set(ids)  # every reference resolves inside the figure


def test_ids_of_two_figures_never_collide(tmp_path: Path) -> None:
    plt = _pyplot()
    paths = []
    for k in range(2):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [k, 1], "s")
        paths += save_figure(fig, tmp_path, f"f{k}")
    html = render_html([Figure(paths[:2], "a"), Figure(paths[2:], "b")])
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_a_png_without_its_svg_is_a_data_uri(tmp_path: Path) -> None:
    plt = _pyplot()
    fig, _ = plt.subplots()
    (png,) = save_figure(fig, tmp_path, "only", formats=("png",))
    html = render_html([Figure([png], "png only")])
    assert re.search(r'<img alt="png only" src="data:image/png;base64,[A-Za-z0-9+/=]+">', html)


def test_inline_svg_drops_declarations_and_namespaces() -> None:
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/x.dtd">\n'
           '<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="1" xmlns="http://www.w3.org/2000/svg">'
           '<metadata><a>https://matplotlib.org/</a></metadata><defs><path id="m1"/></defs>'
           '<use xlink:href="#m1"/><g clip-path="url(#m1)"><text>see https://example.org</text></g></svg>')
    out = inline_svg(svg, "p-")
    assert out.startswith("<svg width=\"1\">")
    assert 'id="p-m1"' in out and 'href="#p-m1"' in out and "url(#p-m1)" in out
    assert "http" not in out.replace("https&#58;//example.org", "")


def verdict(v: str, claim: str = "c1", measured: str | None = "80x") -> Verdict:
    return Verdict(claim_id=claim, seed="000_x.txt", study="ops", text=f"GPU over CPU {XSS}", quantity="speedup",
                   paper="87.6x", measured=measured, verdict=v, detail=f"tolerance 10% {CLOSE}")


def test_the_verdicts_table_is_coloured_by_verdict(tmp_path: Path) -> None:
    verdicts = [verdict(HOLDS, "a"), verdict(DOES_NOT_HOLD, "b"), verdict(CANNOT_CHECK, "c", measured=None)]
    page = render_page([data_of([result("k", samples(1e-3, 1))], tmp_path)], verdicts)
    assert "3 claims: 1 holds, 1 does not hold, 1 cannot check here." in page
    for cls in ("verdict-holds", "verdict-fails", "verdict-cannot"):
        assert f'<tr class="{cls}">' in page
    assert XSS not in page and CLOSE not in page
    assert [v["verdict"] for v in extract(page)["verdicts"]] == [HOLDS, DOES_NOT_HOLD, CANNOT_CHECK]


def test_a_page_with_no_verdicts_says_so(tmp_path: Path) -> None:
    page = render_page([data_of([result("k", samples(1e-3, 1))], tmp_path)], [])
    assert "No verdicts" in page and "<tr class=\"verdict-" not in page
    assert extract(page)["verdicts"] == []


def test_every_stored_string_is_escaped(tmp_path: Path) -> None:
    """An error, a reason, a validity reason, a case key, a study path and an environment carrying markup: the
    page shows them as text, and none can end the JSON block early."""
    results = [result(f"k{XSS}", samples(1e-3, 1), validity="noisy", validity_reason=f"odd {XSS}"),
               result("bad", None, status="error", reason=f"ValueError: {XSS} {CLOSE}"),
               result("late", None, status="timeout", reason=CLOSE)]
    env = {"cpu_model": f"CPU {XSS}", "gpus": [{"name": f"GPU {CLOSE}", "index": 0}],
           "frameworks": {"numpy": {"version": XSS}}, "os": CLOSE}
    page = render_page([data_of(results, tmp_path, run_row(study_path=f"/tmp/{XSS}/s.yaml"), env)], [])
    assert XSS not in page and CLOSE not in page and "<b>x</b>" not in page
    assert page.count("<script") == 2  # the JSON block and our own script: nothing else became one
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    doc = extract(page)
    (run,) = doc["runs"]
    assert run["run"]["study_path"] == f"/tmp/{XSS}/s.yaml"
    assert run["environment"]["gpus"][0]["name"] == f"GPU {CLOSE}"
    assert [r["reason"] for r in run["results"]][1:] == [f"ValueError: {XSS} {CLOSE}", CLOSE]


def test_the_raw_data_parses_back_with_every_case_and_sample(tmp_path: Path) -> None:
    results = [result(f"k{i}", samples(1e-4 * (i + 1), i), rep=i % 2) for i in range(6)]
    results.append(result("nan", [1e-3, 2e-3, 3e-3]))
    page = render_page([data_of(results, tmp_path)], [])
    body = re.search(r'<script type="application/json" id="dlperf-data">(.*?)</script>', page, re.DOTALL)
    assert body and "<" not in body.group(1) and "&" not in body.group(1)
    doc = extract(page)
    got = doc["runs"][0]["results"]
    assert [r["case_key"] for r in got] == [r.case_key for r in results]
    assert all(math.isclose(a, b) for r, want in zip(got, results, strict=True)
               for a, b in zip(r["measurement"]["sample_times_s"], want.measurement["sample_times_s"], strict=True))


def test_the_page_has_its_parts_and_nothing_external(tmp_path: Path) -> None:
    results = [result("a", samples(1e-3, 1)), result("b", None, status="oom", reason="MemoryError")]
    env = {"cpu_model": "X", "gpus": [], "cpu_peaks_theoretical": {"peaks_source": "catalog (https://vendor.example)"}}
    page = render_page([data_of(results, tmp_path, env=env)], [])
    for anchor in ("summary", "verdicts", "run-1-results", "run-1-study", "run-1-samples", "run-1-flags",
                   "run-1-env", "run-1-reproduce", "data"):
        assert f'id="{anchor}"' in page and f'href="#{anchor}"' in page, anchor
    assert "http://" not in page and "https://" not in page and "<link" not in page
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', page))
    assert 'document.body.dataset.ready = "1"' in page
    assert "no GPU" in page and "MemoryError" in page and "oom" in page


def test_an_address_glued_to_a_word_is_no_address_either(tmp_path: Path) -> None:
    """`xhttps://host/a.js` in a stored reason: neither the page nor its JSON holds an http(s):// afterwards."""
    results = [result("bad", None, status="error", reason="see xhttps://evil.example/b.js and Xhttp://x.example")]
    page = render_page([data_of(results, tmp_path)], [])
    assert not re.search(r"(?i)https?://", page)
    assert extract(page)["runs"][0]["results"][0]["reason"] == "see xhttps://evil.example/b.js and Xhttp://x.example"


def test_rendering_twice_gives_the_same_page(tmp_path: Path) -> None:
    """Figure ids come from the page's own parts, not from what the process drew before."""
    data = data_of([result(f"k{i}", samples(1e-3 * (i + 1), i)) for i in range(3)], tmp_path)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    first = render_page([data], [], generated_at=when)
    render_html([Note("another page in between")])
    assert render_page([data], [], generated_at=when) == first


def test_a_verdict_detail_shows_its_command_as_code(tmp_path: Path) -> None:
    v = Verdict("c1", "000_x.txt", "mlp", "text", "q", "87.6x", None, CANNOT_CHECK,
                "no mlp run given; run `dlperf run mlp --quick`")
    page = render_page([data_of([result("a", samples(1e-3, 1))], tmp_path)], [v])
    shown = page.split('<script type="application/json"')[0]  # the JSON keeps the text as stored
    assert "<code>dlperf run mlp --quick</code>" in shown and "`dlperf run mlp" not in shown


def claim(study: str, v: str, claim_id: str) -> Verdict:
    """A verdict on a claim of `study`, its detail naming the exact command as the rules do."""
    return Verdict(claim_id, "000_x.txt", study, f"claim {claim_id}", "q", "2x", None if v == CANNOT_CHECK else "3x",
                   v, f"no {study} run given; run `dlperf run {study} --quick`")


def before_fold(page: str) -> str:
    """The page down to the folded claims (all of it where nothing is folded), its JSON left out."""
    return page.split('<script type="application/json"')[0].split('<details class="fold">')[0]


def test_a_page_leads_with_its_results_and_folds_the_claims_no_run_here_touches(tmp_path: Path) -> None:
    """A run of no claim's study: its results come before any claim, and every claim (none of which it can
    check) is folded under one line naming the `dlperf run STUDY` commands that would check them."""
    verdicts = [claim("mlp", CANNOT_CHECK, "zz-mlp-1"), claim("backends", CANNOT_CHECK, "zz-bk-1"),
                claim("mlp", CANNOT_CHECK, "zz-mlp-2")]
    page = render_page([data_of([result("a", samples(1e-3, 1))], tmp_path)], verdicts)
    assert page.index('id="run-1-results"') < page.index('id="verdicts"') < page.index('id="data"')
    assert page.index('href="#run-1-results"') < page.index('href="#verdicts"')  # the contents too
    assert "3 claims: 3 cannot check here." in page  # the count still covers every claim
    shown = before_fold(page)
    assert "<tr class=\"verdict-" not in shown and "zz-mlp-1" not in shown and "zz-bk-1" not in shown
    assert ("<summary>3 claims on mlp, backends, studies this run does not include: cannot check here; "
            "<code>dlperf run mlp</code>, <code>dlperf run backends</code> would check them") in page
    folded = page.split('<details class="fold">')[1].split("</details>")[0]
    assert folded.count('<tr class="verdict-cannot">') == 3  # each folded claim keeps its row, and its command
    assert "<code>dlperf run mlp --quick</code>" in folded and "<code>dlperf run backends --quick</code>" in folded
    assert [v["claim_id"] for v in extract(page)["verdicts"]] == ["zz-mlp-1", "zz-bk-1", "zz-mlp-2"]


def test_a_claim_the_run_can_check_keeps_its_row_in_view(tmp_path: Path) -> None:
    """A run with ops cases: the ops claims stay in the table (checked, or not checkable with what is missing),
    as does a claim judged without any run (the catalog); only the mlp claim is folded."""
    ops = [result("a", samples(1e-3, 1)).model_copy(
        update={"workload": "ops", "params": {"op": "add", "size_mb": 1.0, "dtype": "float32"}})]
    verdicts = [claim("ops", HOLDS, "zz-ops-1"), claim("ops", CANNOT_CHECK, "zz-ops-2"),
                claim("catalog", DOES_NOT_HOLD, "zz-cat-1"), claim("mlp", CANNOT_CHECK, "zz-mlp-1")]
    page = render_page([data_of(ops, tmp_path)], verdicts)
    shown = before_fold(page)
    for row in ('<tr class="verdict-holds"><td class="text">zz-ops-1</td>',
                '<tr class="verdict-cannot"><td class="text">zz-ops-2</td>',
                '<tr class="verdict-fails"><td class="text">zz-cat-1</td>'):
        assert row in shown, row
    assert "zz-mlp-1" not in shown
    assert "<summary>1 claim on mlp, a study this run does not include: cannot check here; " \
           "<code>dlperf run mlp</code> would check it" in page
    both = render_page([data_of(ops, tmp_path), data_of([result("b", samples(1e-3, 2))], tmp_path, run_row("r2"))],
                       [claim("mlp", CANNOT_CHECK, "zz-mlp-1")])
    assert "a study these runs do not include" in both


def test_a_dirty_commit_is_checked_out_clean_and_said(tmp_path: Path) -> None:
    from dlperf.report.html.commands import reproduce

    commands, caveats = reproduce(run_row(), {"dlperf_git_commit": "abc123-dirty"})
    assert commands[0].startswith("git checkout abc123 ") and "-dirty" not in commands[0]
    assert any("not committed" in c for c in caveats)


def test_the_commands_come_from_the_stored_run() -> None:
    args = run_command(run_row())
    assert args == ["dlperf", "run", "studies/x.yaml", "--quick", "--framework", "numpy", "--timeout", "30",
                    "--threads", "2", "--new"]


def test_a_thousand_cases_render_in_bounded_size(tmp_path: Path) -> None:
    """1,000 ok cases of 30 samples each: one page, box plots split into figures of at most MAX_BOXES boxes."""
    results = [result(f"size={i}", samples(1e-5 * (1 + i % 50), i)) for i in range(1000)]
    start = time.perf_counter()
    page = render_page([data_of(results, tmp_path)], [])
    took_s = time.perf_counter() - start
    size_mb = len(page.encode()) / 1e6
    print(f"\n1,000-case page: {size_mb:.2f} MB, rendered in {took_s:.1f} s")
    assert len(extract(page)["runs"][0]["results"]) == 1000
    assert page.count('<figure class="plot"') == math.ceil(1000 / MAX_BOXES)
    assert size_mb < 20
    assert "show all 1000 rows" not in page  # the button is the script's; the table is whole in the file
    flagged = sum(bool(findings(r)) for r in results)  # samples drawn at random may look bimodal or drift
    assert page.count('<tr class="st-ok v-valid">') == 1000 + flagged  # the run table, and the flags table


@pytest.mark.parametrize("n", [1, MAX_BOXES, MAX_BOXES + 1])
def test_box_plots_split_at_the_limit(tmp_path: Path, n: int) -> None:
    from dlperf.report.plots.samples import sample_sections

    figures = [s for s in sample_sections([result(f"k{i}", samples(1e-3, i)) for i in range(n)], tmp_path, "s")
               if isinstance(s, Figure)]
    assert len(figures) == math.ceil(n / MAX_BOXES)
    svg = figures[0].paths[0].read_text()
    assert svg.count("<title>") == min(n, MAX_BOXES)  # a tooltip per box
