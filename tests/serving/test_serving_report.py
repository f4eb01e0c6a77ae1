"""The serving report on synthetic stored serve cases (the stored format `dlperf.serving` writes): each scenario's
table shows LoadGen's verdict and metric from the stored dict, an INVALID case its reasons, a shortened run its
label in the terminal, Markdown and HTML, the Server search its probes and a plot with VALID and INVALID probes,
missing keys "-" (never a crash), failed cases their status and reason; the registry draws it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from dlperf.core.result import CaseResult
from dlperf.report import serving_report as sr
from dlperf.report import serving_search as ss
from dlperf.report.html import render_html
from dlperf.report.registry import REPORTS, STUDIES, study_sections
from dlperf.report.sections import Figure, Note, Table, render_markdown, render_terminal
from dlperf.report.study import ReportData
from tests.factories import report_data, run_row, stored

SHORT = ["min duration 3 s (MLPerf 600 s)", "min queries 64 (MLPerf 1024)"]
#: Result keys as LoadGen 6.0 logs them (taken from a real SingleStream run's mlperf_log_detail.txt, rescaled).
LATENCIES = {"result_min_latency_ns": 961_000, "result_max_latency_ns": 29_164_000, "result_mean_latency_ns": 1_162_000,
             "result_50.00_percentile_latency_ns": 1_012_000, "result_90.00_percentile_latency_ns": 1_062_000,
             "result_95.00_percentile_latency_ns": 1_142_000, "result_99.00_percentile_latency_ns": 2_694_000,
             "result_99.90_percentile_latency_ns": 29_164_000}
METRICS = {"SingleStream": {"name": "90th percentile latency", "value": 0.001062, "unit": "s"},
           "MultiStream": {"name": "99th percentile latency per query", "value": 0.015593, "unit": "s"},
           "Server": {"name": "completed samples/s", "value": 451.682, "unit": "samples/s"},
           "Offline": {"name": "samples/s", "value": 1454.86, "unit": "samples/s"}}
EXTRA = {"SingleStream": {"result_query_count": 401, "result_qps_with_loadgen_overhead": 941.5},
         "MultiStream": {"result_query_count": 51, "result_50.00_percentile_per_query_latency_ns": 4_237_000,
                         "result_90.00_percentile_per_query_latency_ns": 4_397_000,
                         "result_99.00_percentile_per_query_latency_ns": 15_593_000,
                         "result_99.90_percentile_per_query_latency_ns": 15_593_000,
                         "result_mean_query_latency_ns": 4_509_000},
         "Server": {"result_query_count": 930, "result_scheduled_samples_per_sec": 451.846,
                    "result_completed_samples_per_sec": 451.682, "result_overlatency_query_count": 0},
         "Offline": {"result_query_count": 1, "result_samples_per_second": 1454.86}}
ASKED = {"SingleStream": "single-stream", "MultiStream": "multi-stream", "Server": "server", "Offline": "offline"}


def loadgen_dict(scenario: str, validity: str = "VALID", reasons: list[str] | None = None,
                 short: list[str] | None = None) -> dict[str, Any]:
    return {"scenario": scenario, "validity": validity, "invalid_reasons": reasons or [],
            "metric": METRICS[scenario], "results": LATENCIES | EXTRA[scenario] | {"result_validity": validity},
            "effective": {"effective_target_qps": 450.0, "effective_samples_per_query": 8},
            "loadgen_version": "6.0.17", "summary_text": "MLPerf Results Summary", "shortened": short or []}


def serve(scenario: str, framework: str = "torch", *, lg: dict[str, Any] | None = None, status: str = "ok",
          reason: str | None = None, search: dict[str, Any] | None = None, model: str = "alexnet",
          extra: dict[str, Any] | None = None, rep: int = 0) -> CaseResult:
    params = {"workload": "cnn", "model": model, "scenario": ASKED[scenario], "max_batch": 1,
              "target_latency_ms": 10.0 if scenario == "Server" else None}
    metrics: dict[str, Any] | None = None
    if status == "ok":
        metrics = {"threads": 2, "device": "cpu", "peak_rss_bytes": 2**30, "baseline_rss_bytes": 2**29}
        metrics |= {"loadgen": lg} if lg is not None else {}
        metrics |= {"server_search": search} if search is not None else {}
        metrics |= extra or {}
    return stored(f"serve/{framework}/cpu/{scenario}/{model}", rep=rep, workload="serve", framework=framework,
                  params=params, status=status, reason=reason, metrics=metrics)


def data(results: list[CaseResult], tmp_path: Path, study: str = "serving") -> ReportData:
    return report_data(results, run=run_row("r", study=study), plot_dir=tmp_path / "plots")


def table(sections: list[Any], scenario: str) -> Table:
    """The scenario's verdict table (its first)."""
    return next(s for s in sections if isinstance(s, Table) and s.title.startswith(f"serving {scenario}:"))


def tables(sections: list[Any], scenario: str) -> list[Table]:
    """The scenario's tables: verdict, latencies, rates and counts."""
    return [s for s in sections if isinstance(s, Table) and s.title.startswith(f"serving {scenario}:")
            and "search" not in s.title and "best valid rate" not in s.title]


def cells(t: Table, i: int = 0) -> dict[str, str]:
    return dict(zip(t.header, t.rows[i], strict=True))


def all_cells(sections: list[Any], scenario: str, i: int = 0) -> dict[str, str]:
    """Row i of the scenario's verdict table with the same case's latencies, rates and counts (every case ok)."""
    out: dict[str, str] = {}
    for t in tables(sections, scenario):
        out |= cells(t, i)
    return out


def terminal(sections: list[Any]) -> str:
    buf = io.StringIO()
    render_terminal(sections, Console(file=buf, width=400, color_system=None))
    return buf.getvalue()


def test_each_scenario_table_shows_loadgens_verdict_metric_and_latencies(tmp_path):
    results = [serve(s, lg=loadgen_dict(s)) for s in ("Offline", "Server", "SingleStream", "MultiStream")]
    sections = sr.sections(data(results, tmp_path))
    titles = [s.title for s in sections if isinstance(s, Table)]
    assert list(dict.fromkeys(t.split(":")[0] for t in titles)) == [
        "serving SingleStream", "serving MultiStream", "serving Server", "serving Offline"]  # MLPerf's order
    assert [len(tables(sections, s)) for s in ("SingleStream", "MultiStream", "Server", "Offline")] == [3, 3, 3, 3]
    single = all_cells(sections, "SingleStream")
    assert "status" not in single  # every case ok: no status column
    assert single["LoadGen verdict"] == "VALID"
    assert single["MLPerf metric"] == "1.06 ms"  # the value; its name is in the note under the table
    notes = [s.text for s in sections if isinstance(s, Note)]
    assert "MLPerf metric (SingleStream): 90th percentile latency" in notes
    assert (single["p50"], single["p90"], single["p99"], single["p99.9"], single["mean"]) == (
        "1.01 ms", "1.06 ms", "2.69 ms", "29.2 ms", "1.16 ms")
    assert single["samples/s"] == "942" and single["queries"] == "401"
    assert single["MLPerf rules"] == "yes"
    assert "MLPerf rules: yes = MLPerf's durations and counts; shortened = shortened: below MLPerf's rules" in notes
    assert (single["framework"], single["device"], single["model"], single["max_batch"], single["threads"]) == (
        "torch", "cpu", "cnn alexnet", "1", "2")
    multi = all_cells(sections, "MultiStream")
    assert multi["p99"] == "15.6 ms" and multi["mean"] == "4.51 ms"
    assert any("per query" in t.title for t in tables(sections, "MultiStream"))
    assert multi["samples/query"] == "8"
    server = all_cells(sections, "Server")
    assert server["MLPerf metric"] == "452"
    assert "MLPerf metric (Server): completed samples/s" in notes
    assert (server["offered"], server["scheduled"], server["completed"]) == ("450", "452", "452")
    assert server["late queries"] == "0"
    assert cells(table(sections, "Offline"))["MLPerf metric"] == "1.45k"
    assert "MLPerf metric (Offline): samples/s" in notes
    assert "mlcommons-loadgen 6.0.17" in str(sections[0].intro)


def test_an_invalid_case_shows_loadgens_reasons(tmp_path):
    bad = serve("Server", "onnxruntime", lg=loadgen_dict("Server", "INVALID", ["latency constraint not met",
                                                                              "early stopping not met"]))
    row = cells(table(sr.sections(data([bad], tmp_path)), "Server"))
    assert row["LoadGen verdict"] == "INVALID (latency constraint not met; early stopping not met)"
    nameless = serve("Server", lg=loadgen_dict("Server", "INVALID"))
    assert sr.verdict(nameless) == "INVALID (no reason stored)"


def test_the_shortened_label_is_in_every_output(tmp_path):
    results = [serve("SingleStream", lg=loadgen_dict("SingleStream", short=SHORT)),
               serve("SingleStream", "onnxruntime", lg=loadgen_dict("SingleStream")),
               serve("Server", lg=loadgen_dict("Server", short=SHORT),
                     search={"target_latency_s": 0.01, "percentile": 0.99, "best_qps": 400.0, "stopped": "bracketed",
                             "probes": [{"target_qps": 400.0, "validity": "VALID", "completed_qps": 399.0,
                                         "latency_p99_s": 0.004, "invalid_reasons": [], "wall_s": 3.1}]})]
    sections = sr.sections(data(results, tmp_path))
    ort, torch = cells(table(sections, "SingleStream")), cells(table(sections, "SingleStream"), 1)
    assert torch["MLPerf rules"] == "shortened"  # the note under the table gives the label and the reasons
    assert ort["framework"] == "onnxruntime" and ort["MLPerf rules"] == "yes"
    notes = [s.text for s in sections if isinstance(s, Note)]
    assert any(n.startswith("shortened: below MLPerf's rules (min duration 3 s (MLPerf 600 s); min queries 64 "
                            "(MLPerf 1024))") and "1 of the 2 SingleStream" in n for n in notes)
    best = next(s for s in sections if isinstance(s, Table) and "best valid rate" in s.title)
    assert cells(best)["MLPerf rules"] == "shortened"
    assert any(n.startswith("shortened: below MLPerf's rules (min duration 3 s") and "the searches of 1 of 1" in n
               for n in notes)
    assert ss.plot_panels([results[2]])["cnn alexnet"]["shortened"] is True
    (fig,) = [s for s in sections if isinstance(s, Figure)]
    assert "(shortened: below MLPerf&apos;s rules)" in fig.paths[1].read_text() or \
        "(shortened: below MLPerf's rules)" in fig.paths[1].read_text()  # in the panel's title
    comparison = [n for n in notes if n.startswith("cnn alexnet:")]
    assert comparison and "[shortened: below MLPerf's rules]" in comparison[0]
    text, md, page = terminal(sections), render_markdown(sections), render_html(sections)
    for out in (text, md, page):
        assert out.count("shortened: below MLPerf") >= 4, out[:2000]
        assert "min duration 3 s (MLPerf 600 s)" in out
    assert "**shortened: below MLPerf's rules**" in md
    assert "<strong>shortened: below MLPerf&#39;s rules</strong>" in page


def test_the_server_search_has_its_probes_best_rate_and_a_plot_with_valid_and_invalid_probes(tmp_path):
    probes = [{"target_qps": q, "validity": v, "completed_qps": c, "latency_p99_s": p99,
               "invalid_reasons": [] if v == "VALID" else ["latency constraint not met"], "wall_s": 3.0}
              for q, v, c, p99 in ((100.0, "VALID", 99.5, 0.003), (200.0, "VALID", 198.0, 0.006),
                                   (400.0, "INVALID", 310.0, 0.050), (300.0, "INVALID", 280.0, 0.012))]
    search = {"target_latency_s": 0.01, "percentile": 0.99, "probes": probes, "best_qps": 200.0,
              "stopped": "the bracket is narrower than 10%"}
    torch = serve("Server", lg=loadgen_dict("Server"), search=search)
    ort = serve("Server", "onnxruntime", lg=loadgen_dict("Server"),
                search=search | {"best_qps": 300.0, "probes": probes[:2] + [probes[3] | {"validity": "VALID"}]})
    sections = sr.sections(data([torch, ort], tmp_path))
    probe_table = next(s for s in sections if isinstance(s, Table) and "every probe" in s.title)
    rows = [dict(zip(probe_table.header, r, strict=True)) for r in probe_table.rows]
    assert [(r["framework"], r["#"], r["offered"]) for r in rows[:4]] == [
        ("onnxruntime", "1", "100"), ("onnxruntime", "2", "200"), ("onnxruntime", "3", "300"), ("torch", "1", "100")]
    third = next(r for r in rows if r["framework"] == "torch" and r["#"] == "3")
    assert third["LoadGen verdict"] == "INVALID (latency constraint not met)" and third["p99"] == "50 ms"
    assert third["completed"] == "310" and third["wall"] == "3 s"
    best = next(s for s in sections if isinstance(s, Table) and "best valid rate" in s.title)
    by_fw = {r[0]: dict(zip(best.header, r, strict=True)) for r in best.rows}
    assert by_fw["torch"]["best valid rate"] == "200" and by_fw["torch"]["VALID/probes"] == "2 / 4"
    assert by_fw["torch"]["p99 bound"] == "10 ms"
    assert "search stopped: torch cpu cnn alexnet max_batch 1: the bracket is narrower than 10%" in [
        s.text for s in sections if isinstance(s, Note)]
    panels = ss.plot_panels([torch, ort])
    marks = panels["cnn alexnet"]["lines"]["torch cpu max_batch 1"]
    assert sorted(marks) == [(100.0, 0.003, True), (200.0, 0.006, True), (300.0, 0.012, False),
                             (400.0, 0.05, False)]
    assert panels["cnn alexnet"]["bounds"] == [0.01]
    (fig,) = [s for s in sections if isinstance(s, Figure)]
    assert [p.name for p in fig.paths] == ["serving-server-search.png", "serving-server-search.svg"]
    svg = fig.paths[1].read_text()
    assert "VALID probe" in svg and "INVALID probe" in svg and "latency bound 10 ms" in svg
    assert fig.paths[0].stat().st_size > 0
    notes = [s.text for s in sections if isinstance(s, Note)]
    assert "cnn alexnet: highest valid Server rate: onnxruntime cpu max_batch 1 (300 samples/s offered; torch cpu " \
           "max_batch 1 200)" in notes


def test_missing_keys_print_a_dash_and_never_crash(tmp_path):
    bare = serve("SingleStream", lg={"scenario": "SingleStream"})
    nothing = serve("Offline")  # an ok case with no LoadGen dict at all
    no_value = serve("Server", lg={"scenario": "Server", "validity": "VALID",
                                   "metric": {"name": "completed samples/s", "value": None, "unit": "samples/s"}},
                     search={"probes": [{"target_qps": 10.0}, {}]})
    sections = sr.sections(data([bare, nothing, no_value], tmp_path))
    row = all_cells(sections, "SingleStream")
    assert row["LoadGen verdict"] == "- (LoadGen's validity not stored)"
    assert row["MLPerf metric"] == "-" and row["p90"] == "-" and row["samples/s"] == "-"
    assert row["MLPerf rules"] == "not stored"
    row = all_cells(sections, "Offline")
    assert row["LoadGen verdict"] == "- (no LoadGen result stored)" and row["samples/s"] == "-"
    row = all_cells(sections, "Server")
    assert row["MLPerf metric"] == "- (none)"
    assert row["offered"] == "-"  # neither LoadGen's effective rate nor a target_qps
    probe_table = next(s for s in sections if isinstance(s, Table) and "every probe" in s.title)
    assert [r[6] for r in probe_table.rows] == ["- (not stored)", "- (not stored)"]
    best = next(s for s in sections if isinstance(s, Table) and "best valid rate" in s.title)
    assert cells(best)["best valid rate"] == "none VALID"
    assert any(isinstance(s, Note) and s.text.startswith("search stopped: ") and s.text.endswith(": -")
               for s in sections)
    assert any(isinstance(s, Note) and s.text.startswith("2 probe(s) stored no offered rate") for s in sections)
    assert not any(isinstance(s, Figure) for s in sections)  # nothing to draw: no plot, no crash
    terminal(sections), render_markdown(sections), render_html(sections)


def test_failed_cases_keep_their_status_and_reason(tmp_path):
    results = [serve("SingleStream", "openvino", status="unsupported", reason="openvino is not installed"),
               serve("Server", "tensorflow", status="timeout", reason="no result within 1800 s"),
               serve("SingleStream", lg=loadgen_dict("SingleStream"))]
    sections = sr.sections(data(results, tmp_path))
    row = next(dict(zip(t.header, r, strict=True)) for t in [table(sections, "SingleStream")] for r in t.rows
               if r[0] == "openvino")
    assert row["status"] == "unsupported"
    assert row["LoadGen verdict"] == "- (case unsupported: openvino is not installed)"
    assert row["MLPerf metric"] == "-" and row["MLPerf rules"] == "-"
    assert [r[0] for r in tables(sections, "SingleStream")[1].rows] == ["torch"]  # latencies: the ok case only
    row = cells(table(sections, "Server"))
    assert row["status"] == "timeout" and "no result within 1800 s" in row["LoadGen verdict"]
    notes = [s.text for s in sections if isinstance(s, Note)]
    assert "cnn alexnet: lowest SingleStream p90: torch cpu max_batch 1 (1.06 ms)" in notes


def test_repetitions_get_a_column_and_invalid_single_stream_is_no_winner(tmp_path):
    results = [serve("SingleStream", lg=loadgen_dict("SingleStream", "INVALID", ["min duration not met"]), rep=r)
               for r in (0, 1)]
    sections = sr.sections(data(results, tmp_path))
    t = table(sections, "SingleStream")
    assert [cells(t, i)["rep"] for i in (0, 1)] == ["0", "1"]
    notes = [s.text for s in sections if isinstance(s, Note)]
    assert "cnn alexnet: no SingleStream case LoadGen judged VALID (2 case(s))" in notes


def test_registered_for_the_serve_workload_and_the_serving_study(tmp_path):
    assert REPORTS["serve"] is sr.sections and STUDIES["serving"] is sr.sections
    results = [serve("SingleStream", lg=loadgen_dict("SingleStream"))]
    drawn = study_sections(data(results, tmp_path, study="serving"))
    assert sum(1 for s in drawn if isinstance(s, Table) and s.title.startswith("serving SingleStream")) == 3
    assert len(tables(drawn, "SingleStream")) == 3  # drawn once: verdict, latencies, rates and counts
    assert sr.sections(data([], tmp_path)) == []


def terminal_at(sections: list[Any], width: int) -> str:
    buf = io.StringIO()
    render_terminal(sections, Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def assert_whole(sections: list[Any], text: str) -> None:
    """Every table's header and cell is in the terminal output whole: numbers and short cells verbatim on one line,
    wrapped cells word by word; nothing cut to "…", no column dropped."""
    assert "…" not in text
    lines = text.splitlines()
    for t in (s for s in sections if isinstance(s, Table)):
        for i, cell in enumerate([*t.header, *(c for row in t.rows for c in row)]):
            col = i % len(t.header)
            wrapped = col in t.text_cols or col - len(t.header) in t.text_cols
            if wrapped or " " in cell and len(cell) > 8:  # a header or a text cell may wrap at its spaces
                assert all(word in text for word in cell.split()), (t.title, cell)
            else:
                assert any(cell in line for line in lines), (t.title, cell)


def test_the_terminal_tables_fit_120_and_200_columns_whole(tmp_path):
    """The serving tables at 120 and 200 columns: every header and value whole, none cut to "…", no column lost;
    a Server table per kind (verdict, latencies, rates), the short MLPerf-rules cell with the label in the note."""
    search = {"target_latency_s": 0.015, "percentile": 0.99, "best_qps": 9450.0, "confirmed": False,
              "stopped": "probe limit reached (6 LoadGen runs)",
              "probes": [{"target_qps": 27_200.0, "validity": "INVALID", "completed_qps": 26_000.0,
                          "latency_p99_s": 0.0623, "wall_s": 1.07,
                          "invalid_reasons": ["latency constraint not met", "min duration not met",
                                              "early stopping not met"]},
                         {"target_qps": 9450.0, "validity": "VALID", "completed_qps": 9550.0,
                          "latency_p99_s": 0.0106, "wall_s": 2.04, "invalid_reasons": []}]}
    results = [serve(s, fw, lg=loadgen_dict(s, short=SHORT), model=m,
                     search=search if s == "Server" else None)
               for s in ("SingleStream", "MultiStream", "Server", "Offline")
               for fw in ("onnxruntime", "tensorflow") for m in ("alexnet", "googlenet")]
    results[1] = serve("SingleStream", "openvino", status="unsupported", reason="openvino is not installed here")
    sections = sr.sections(data(results, tmp_path))
    for width in (120, 200):
        text = terminal_at(sections, width)
        assert_whole(sections, text)
        assert max(len(line.rstrip()) for line in text.splitlines()) <= width
        assert "shortened: below MLPerf's rules (min duration 3 s (MLPerf 600 s)" in text
    verdicts = table(sections, "Server")
    assert "status" not in verdicts.header and "status" in table(sections, "SingleStream").header


def test_show_and_the_csv_export_carry_loadgens_verdict_and_the_shortened_label():
    """`dlperf show`'s run table says a shortened serve run in its validity cell and its validity line; the CSV
    export has LoadGen's columns and names the served workload `param.workload` beside the case's own `serve`."""
    import csv

    from dlperf.report.tables import result_rows, validity_line
    from dlperf.store.export import to_csv

    short = serve("SingleStream", lg=loadgen_dict("SingleStream", short=SHORT), extra={"validity": "valid"})
    full = serve("Server", "onnxruntime", lg=loadgen_dict("Server"), extra={"validity": "valid"})
    rows = result_rows([short, full])
    assert rows[0]["validity"].endswith("LoadGen VALID, shortened") and "shortened" not in rows[1]["validity"]
    assert "1 served case(s) shortened: below MLPerf's rules" in validity_line([short, full])
    table = list(csv.DictReader(io.StringIO(to_csv([short, full]))))
    assert table[0]["workload"] == "serve" and table[0]["param.workload"] == "cnn" and table[0]["model"] == "alexnet"
    assert (table[0]["loadgen_validity"], table[0]["loadgen_metric_name"], table[0]["loadgen_metric"],
            table[0]["loadgen_metric_unit"]) == ("VALID", "90th percentile latency", "0.001062", "s")
    assert table[0]["shortened"] == ("shortened: below MLPerf's rules (min duration 3 s (MLPerf 600 s); min queries 64 "
                                     "(MLPerf 1024))")
    assert table[1]["shortened"] == "no" and table[1]["loadgen_metric_unit"] == "samples/s"
    plain = to_csv([CaseResult.from_row({**short.as_row(), "workload": "cnn", "params": {"model": "alexnet"}})])
    assert "loadgen_validity" not in plain.splitlines()[0]  # no served case: the columns as before
