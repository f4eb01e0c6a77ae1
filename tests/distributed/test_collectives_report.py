"""The collectives report on synthetic stored collectives cases (the stored format of common18: samples of
`iters` back-to-back operations, `metrics["collective"]`): algbw and busbw recomputed from the median as loaded
with nccl-tests' definitions (equal to the stored copies for a fresh result, and the samples' word where a stored
copy disagrees), sizes in binary units and GB/s decimal, failed cases kept, the definitions and the gloo caveat,
the busbw plot, 120 columns, the progress line, and `dlperf report` in Markdown and HTML over a store."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dlperf.core.result import CaseResult
from dlperf.distributed.bandwidth import bandwidths, bus_factor
from dlperf.report import collectives_report as cr
from dlperf.report.registry import REPORTS, study_sections
from dlperf.report.sections import Figure, Note, Table, render_terminal
from dlperf.report.study import ReportData
from dlperf.runner.derive import derive_metrics
from dlperf.timing import Measurement
from dlperf.workloads import Cost
from tests.factories import report_data, run_row
from tests.factories import stored as read_back

KIB, MIB = 2**10, 2**20
ITERS = 10


def blocks(per_op_s: float) -> list[float]:
    """11 block times of ITERS operations whose per-operation median is exactly `per_op_s`."""
    return [ITERS * per_op_s * (1 + 0.01 * k) for k in range(-5, 6)]


def coll(op: str, size: int, n: int, per_op_s: float | None, *, status: str = "ok", reason: str | None = None,
         rep: int = 0, checked: bool = True, stored: tuple[float, float] | None = None) -> CaseResult:
    """A stored collectives case: `op` of S = `size` bytes on `n` ranks, `per_op_s` per operation (None: did not
    run); the stored algbw/busbw are computed from the median at store time, as the engine does, unless `stored`."""
    params = {"op": op, "size_bytes": size, "world_size": n, "dtype": "float32", "threads_per_rank": 1, "nodes": 1}
    m = Measurement(sample_times_s=tuple(blocks(per_op_s or 1.0)), sample_iters=(ITERS,) * 11)
    metrics: dict[str, Any] | None = None
    if status == "ok":
        metrics = derive_metrics(m, Cost(flops=None, bytes_moved=float(size), samples=1))
        algbw, busbw = stored or bandwidths(op, size, n, metrics["median_s"])
        metrics |= {"threads": n, "device": "cpu", "busy_threads": n,
                    "collective": {"op": op, "size_bytes": size, "world_size": n, "backend": "gloo",
                                   "dtype": "float32", "bus_factor": bus_factor(op, n), "iters_per_sample": ITERS,
                                   "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": busbw, "checked": checked,
                                   "ranks": [], "launcher": {"command": ["torchrun"], "wall_s": 3.0}}}
    return read_back(f"collectives/torch/cpu/op={op},size_bytes={size},world_size={n}", rep=rep,
                     workload="collectives", framework="torch", params=params, status=status, reason=reason,
                     measurement=m.to_dict() if status == "ok" else None, metrics=metrics)


def data(results: list[CaseResult], tmp_path: Path) -> ReportData:
    return report_data(results, run=run_row("r", study="collectives"), plot_dir=tmp_path / "plots")


def op_tables(sections: list[Any]) -> dict[str, Table]:
    return {s.title.split()[1]: s for s in sections if isinstance(s, Table)}


def rows(t: Table) -> list[dict[str, str]]:
    return [dict(zip(t.header, r, strict=True)) for r in t.rows]


def notes(sections: list[Any]) -> list[str]:
    return [s.text for s in sections if isinstance(s, Note)]


def test_bandwidths_are_recomputed_with_nccl_tests_definitions(tmp_path):
    """all-reduce of 1 MiB on 2 ranks in 1 ms: algbw = 1048576 B / 1 ms = 1.05 GB/s, busbw = algbw x 2(2-1)/2 =
    1.05 GB/s; on 4 ranks in 2 ms: algbw 0.524 GB/s, busbw x 2(3)/4 = 1.5 -> 0.786 GB/s; all-gather of 64 KiB on 4
    ranks in 0.1 ms: algbw 0.655 GB/s, busbw x 3/4 = 0.492 GB/s; broadcast x 1."""
    results = [coll("all_reduce", MIB, 2, 1e-3), coll("all_reduce", MIB, 4, 2e-3),
               coll("all_reduce", 64 * KIB, 2, 1e-4), coll("all_gather", 64 * KIB, 4, 1e-4),
               coll("broadcast", MIB, 2, 5e-4)]
    sections = cr.sections(data(results, tmp_path))
    by = op_tables(sections)
    assert list(by) == ["all_reduce", "all_gather", "broadcast"]  # nccl-tests' op order
    assert by["all_reduce"].title == ("collectives all_reduce (float32, torch cpu gloo): time per operation and "
                                      "bandwidth")
    ar = rows(by["all_reduce"])
    assert [(r["size"], r["ranks"]) for r in ar] == [("64 KiB", "2"), ("1 MiB", "2"), ("1 MiB", "4")]
    assert (ar[1]["median op"], ar[1]["algbw GB/s"], ar[1]["busbw GB/s"], ar[1]["bus factor"]) == (
        "1 ms", "1.05", "1.05", "1")
    assert (ar[2]["median op"], ar[2]["algbw GB/s"], ar[2]["busbw GB/s"], ar[2]["bus factor"]) == (
        "2 ms", "0.524", "0.786", "1.5")
    assert ar[1]["95% interval"] == "960 us - 1.04 ms" and ar[1]["ops"] == "11" and ar[1]["checked"] == "yes"
    ag = rows(by["all_gather"])[0]
    assert (ag["algbw GB/s"], ag["busbw GB/s"], ag["bus factor"]) == ("0.655", "0.492", "0.75")
    bc = rows(by["broadcast"])[0]
    assert (bc["algbw GB/s"], bc["busbw GB/s"], bc["bus factor"]) == ("2.1", "2.1", "1")
    said = notes(sections)
    assert any(n.startswith("definitions: algbw = S / t") and "2(n-1)/n" in n and "10^9 bytes/s" in n for n in said)
    assert any(n.startswith("gloo on one host: the ranks exchange data through loopback TCP") and
               "not a network" in n for n in said)


def test_the_recomputed_figures_agree_with_the_stored_copies_of_a_fresh_result_and_win_over_stale_ones(tmp_path):
    fresh = coll("reduce_scatter", 4 * MIB, 2, 3e-3)
    c = fresh.m.get("collective")
    bw = cr.recomputed("reduce_scatter", 4 * MIB, 2, fresh.m.median_s)
    assert bw is not None
    assert bw[0] == pytest.approx(c["algbw_bytes_per_s"], rel=1e-12)
    assert bw[1] == pytest.approx(c["busbw_bytes_per_s"], rel=1e-12)
    row = rows(op_tables(cr.sections(data([fresh], tmp_path)))["reduce_scatter"])[0]
    assert row["algbw GB/s"] == f"{c['algbw_bytes_per_s'] / 1e9:.3g}" == "1.4"
    assert row["busbw GB/s"] == f"{c['busbw_bytes_per_s'] / 1e9:.3g}" == "0.699"
    stale = coll("reduce_scatter", 4 * MIB, 2, 3e-3, stored=(9e12, 9e12))  # a copy the samples do not say
    row = rows(op_tables(cr.sections(data([stale], tmp_path)))["reduce_scatter"])[0]
    assert (row["algbw GB/s"], row["busbw GB/s"]) == ("1.4", "0.699")


def test_failed_cases_keep_their_row_and_a_wrong_output_is_called_out(tmp_path):
    results = [coll("all_reduce", MIB, 2, 1e-3), coll("all_reduce", 64 * MIB, 2, None, status="timeout",
                                                      reason="no result within 120 s"),
               coll("all_reduce", MIB, 8, None, status="unsupported", reason="8 ranks need 8 GPUs; 1 found"),
               coll("all_reduce", KIB, 2, 2e-5, checked=False)]
    sections = cr.sections(data(results, tmp_path))
    table = op_tables(sections)["all_reduce"]
    by = {(r["size"], r["ranks"]): r for r in rows(table)}
    assert list(by) == [("1 KiB", "2"), ("1 MiB", "2"), ("1 MiB", "8"), ("64 MiB", "2")]
    assert (by[("64 MiB", "2")]["status"], by[("64 MiB", "2")]["median op"]) == ("timeout", "- [2]")
    assert (by[("1 MiB", "8")]["status"], by[("1 MiB", "8")]["busbw GB/s"]) == ("unsupported", "-")
    assert by[("1 MiB", "8")]["bus factor"] == "1.75"  # 2 x 7 / 8
    assert by[("1 KiB", "2")]["checked"] == "NO" and by[("1 MiB", "2")]["status"] == "ok"
    said = notes(sections)
    assert "[1] 1 MiB on 8 ranks: unsupported: 8 ranks need 8 GPUs; 1 found" in said
    assert "[2] 64 MiB on 2 ranks: timeout: no result within 120 s" in said
    assert any(n.startswith("checked NO: a rank's output of all_reduce differed") for n in said)


def test_the_busbw_plot_has_a_line_per_op_and_the_registry_draws_the_report(tmp_path):
    results = [coll(op, s, 2, t * s / MIB) for op in ("all_reduce", "broadcast") for s, t in ((KIB, 4e-3),
                                                                                              (MIB, 1e-3))]
    results.append(coll("all_reduce", MIB, 1, 1e-4))
    assert REPORTS["collectives"] is cr.sections
    sections = study_sections(data(results, tmp_path))
    (fig,) = [s for s in sections if isinstance(s, Figure)]
    assert [p.name for p in fig.paths] == ["collectives-busbw.png", "collectives-busbw.svg"]
    panels = cr.plot_panels(cr.grouped(results))
    assert list(panels) == ["torch cpu gloo, 1 rank, float32", "torch cpu gloo, 2 ranks, float32"]
    two = panels["torch cpu gloo, 2 ranks, float32"]
    assert sorted(two) == ["all_reduce", "broadcast"]
    # 1 KiB in 4 ms x 1 KiB / 1 MiB = 3.9 us: 0.262 GB/s; 1 MiB in 1 ms: 1.05 GB/s (broadcast: busbw = algbw)
    assert [round(b / 1e9, 4) for _, b in sorted(two["broadcast"])] == [0.2621, 1.0486]
    svg = fig.paths[1].read_text()
    assert "all_reduce" in svg and "broadcast" in svg and "bus bandwidth (GB/s" in svg
    assert any(n.startswith("one rank: the bus factor of all-reduce") for n in notes(sections))


def test_every_table_fits_120_columns(tmp_path):
    results = [coll(op, s, n, 1e-3 * s / MIB + 5e-5) for op in ("all_reduce", "all_gather", "reduce_scatter",
                                                                 "broadcast")
               for s in (4 * KIB, 256 * KIB, 64 * MIB) for n in (1, 2)]
    results += [coll("all_gather", 256 * MIB, 2, None, status="oom", reason="rank 1 ran out of memory"),
                coll("all_gather", 256 * KIB, 2, 1e-3, rep=1),
                coll("all_gather", 256 * KIB, 2, None, status="crashed", reason="rank 0 killed", rep=2)]
    sections = cr.sections(data(results, tmp_path))
    for width in (120, 200):
        buf = io.StringIO()
        render_terminal(sections, Console(file=buf, width=width, color_system=None))
        text = buf.getvalue()
        assert "…" not in text
        lines = text.splitlines()
        for t in (s for s in sections if isinstance(s, Table)):
            for word in t.header + [c for row in t.rows for c in row]:
                assert any(word in line for line in lines), (width, word)
        assert max(len(line) for line in lines if line.startswith(("┃", "│", "┏", "└"))) <= width
    ag = {(r["size"], r["ranks"]): r for r in rows(op_tables(sections)["all_gather"])}
    assert ag[("256 KiB", "2")]["status"] == "2/3 ok" and ag[("256 KiB", "2")]["ops"] == "22"


def test_the_progress_line_names_algbw_and_busbw_next_to_the_median():
    from dlperf.cli.progress import ConsoleEvents

    buf = io.StringIO()
    events = ConsoleEvents(Console(file=buf, width=300, color_system=None))
    events.case_done(1, 2, coll("all_reduce", MIB, 4, 2e-3))
    events.case_done(2, 2, coll("broadcast", MIB, 2, None, status="timeout", reason="no result within 120 s"))
    first, second = buf.getvalue().splitlines()
    assert first == ("[1/2] collectives/torch/cpu/op=all_reduce,size_bytes=1048576,world_size=4: ok median 2 ms "
                     "(IQR 5.0%, n=11), all_reduce 1 MiB on 4 ranks: algbw 0.524 GB/s, busbw 0.786 GB/s"), first
    assert second.endswith(": timeout no result within 120 s")


def test_dlperf_report_draws_the_collectives_sections_in_markdown_and_html(tmp_path, monkeypatch):
    from dlperf.cli import main
    from dlperf.hardware.identity import identity_hash
    from dlperf.store import Store
    from tests.history_store import environment

    store = Store(tmp_path / "s.sqlite")
    fp = environment("m1")
    env_id = store.environment_id(fp, identity_hash(fp))
    run_id = store.create_run(study="collectives", variant="quick", study_hash="h", study_path="p", filters={},
                              settings={"threads": 2}, env_id=env_id, n_cases=2, dlperf_version="0.1.0",
                              derived={})
    for r in (coll("all_reduce", MIB, 2, 1e-3), coll("all_reduce", 4 * MIB, 2, None, status="timeout",
                                                      reason="no result within 120 s")):
        store.add_result(r.model_copy(update={"run_id": run_id, "env_id": env_id}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLPERF_DB", str(tmp_path / "s.sqlite"))
    for fmt, out in (("markdown", "r.md"), ("html", "r.html")):
        with pytest.raises(SystemExit) as exc:
            main(["report", run_id, "--format", fmt, "-o", str(tmp_path / out)])
        assert exc.value.code in (0, None)
    md, page = (tmp_path / "r.md").read_text(), (tmp_path / "r.html").read_text()
    assert "| 1 MiB | 2 | 1 ms | 960 us - 1.04 ms | 11 | 1.05 | 1.05 | 1 | yes | ok |" in md
    assert "| 4 MiB | 2 | - [1] |" in md and "collectives-busbw.png" in md
    assert "Gloo on one host" in md and "Algbw = S / t" in md
    assert "all_reduce (float32, torch cpu, gloo)" in page and "no result within 120 s" in page and "<svg" in page


def test_the_run_table_heads_a_collectives_bytes_rate_algbw_never_bare_gb_s():
    """The run table's bytes / median time is nccl-tests' algbw, not the busbw of the collectives table: for
    all-gather on 2 ranks the two differ by 2x, so a bare "GB/s" beside busbw would read as the wrong one."""
    from dlperf.report.html.parts import run_table_blocks
    from dlperf.report.tables import render_markdown
    from dlperf.report.tables import render_terminal as run_table

    results = [coll("all_gather", MIB, 2, 1e-3), coll("all_gather", 4 * MIB, 2, None, status="timeout",
                                                       reason="no result within 120 s")]
    algbw, busbw = bandwidths("all_gather", MIB, 2, results[0].m.median_s)
    assert algbw == pytest.approx(2 * busbw)  # the 2x that a bare label hides
    run = run_row("r", study="collectives", n_cases=2, started_at=datetime.now(UTC))
    buf = io.StringIO()
    run_table(run, {}, results, Console(file=buf, width=200, color_system=None))
    header = next(line for line in buf.getvalue().splitlines() if line.startswith("┃"))
    cells = [c.strip() for c in header.strip("┃").split("┃")]
    assert "algbw GB/s" in cells and "GB/s" not in cells
    row = next(line for line in buf.getvalue().splitlines() if "all_gather" in line and "ok" in line)
    assert f" {algbw / 1e9:.3g} " in row  # the column holds algbw: 1 MiB in 1 ms
    md = render_markdown(run, {}, results)
    assert "| algbw GB/s |" in md and "| GB/s |" not in md
    assert run_table_blocks(run, results)[0]["header"].count("algbw GB/s") == 1
    # in a table of several workloads (none is drawn today, but the rows are shared) the collective's cell says it
    from dlperf.report.run_columns import column_titles
    from dlperf.report.tables import result_rows

    other = results[0].model_copy(update={"workload": "ops"})
    mixed = result_rows([results[0], other])
    assert mixed[0]["GB/s"] == f"{algbw / 1e9:.3g} algbw" and not mixed[1]["GB/s"].endswith("algbw")
    assert "GB/s" in column_titles(("median", "GB/s"), [results[0], other])
