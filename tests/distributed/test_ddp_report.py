"""The ddp report on synthetic stored ddp cases (the stored format of common18: one sample per optimizer step,
`metrics["ddp"]`): efficiency and speed-up against hand-computed numbers, strong and weak series apart with what
stays fixed, a missing or failed world size 1 case explained, failed cases kept with their status, communication
and rank imbalance, validity marks, the plot, 120 columns, the progress line, and `dlperf report` in Markdown and
HTML over a store."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dlperf.core.result import CaseResult
from dlperf.report import ddp_report as dr
from dlperf.report.registry import REPORTS, study_sections
from dlperf.report.sections import Figure, Heading, Note, Table, render_terminal
from dlperf.report.study import ReportData
from dlperf.runner.derive import derive_metrics
from dlperf.timing import Measurement
from dlperf.workloads import Cost
from tests.factories import report_data, run_row, stored


def steps(centre: float) -> list[float]:
    """11 step times whose median is exactly `centre` (a 1% ladder around it)."""
    return [centre * (1 + 0.01 * k) for k in range(-5, 6)]


def comm_dict(n: int, comm_s: float | None = 0.02, step_s: float | None = 0.07) -> dict[str, Any]:
    if n == 1:
        return {"source": "torch.profiler", "profiled_steps": 5, "comm_s_per_step": None, "step_s_profiled": 0.1,
                "comm_fraction": None, "events": {}, "note": "one rank: DDP does not communicate"}
    return {"source": "torch.profiler", "profiled_steps": 5, "comm_s_per_step": comm_s, "step_s_profiled": step_s,
            "comm_fraction": comm_s / step_s if comm_s and step_s else None,
            "events": {"gloo:all_reduce": comm_s}, "note": "DDP overlaps the all-reduce with the backward pass"}


def ddp(n: int, centre: float | None, *, scaling: str = "strong", batch: int = 8, status: str = "ok",
        reason: str | None = None, rep: int = 0, workload: str = "cnn", model: str = "lenet5",
        ranks: list[float] | None = None, extra: dict[str, Any] | None = None) -> CaseResult:
    """A stored ddp case of `n` ranks whose median step is `centre` seconds (None: it did not run)."""
    params = {"workload": workload, "model": model, "world_size": n, "scaling": scaling, "batch": batch,
              "threads_per_rank": 1, "nodes": 1, "bucket_cap_mb": 25.0, "profile_steps": 5}
    if workload == "transformer":
        params["seq_len"] = 16
    glob, per = (batch, batch // n) if scaling == "strong" else (batch * n, batch)
    unit = "image" if workload == "cnn" else "token"
    samples = glob * (16 if workload == "transformer" else 1)
    m = Measurement(sample_times_s=tuple(steps(centre or 1.0)), sample_iters=(1,) * 11)
    metrics: dict[str, Any] | None = None
    if status == "ok":
        metrics = derive_metrics(m, Cost(flops=None, samples=samples)) | {"threads": n, "device": "cpu"}
        metrics["busy_threads"] = n
        metrics["ddp"] = {"world_size": n, "nodes": 1, "nproc_per_node": n, "backend": "gloo", "scaling": scaling,
                          "global_batch": glob, "batch_per_rank": per, "threads_per_rank": 1, "sample_unit": unit,
                          "warmup_steps": 2, "steps_timed": 11,
                          "rank_step_s_median": ranks if ranks is not None else [centre] * n,
                          "comm": comm_dict(n), "ranks": [], "launcher": {"command": ["torchrun"], "wall_s": 4.0}}
        metrics |= extra or {}
    key = f"ddp/torch/cpu/{workload},{model},{scaling},batch={batch},world_size={n}"
    return stored(key, rep=rep, workload="ddp", framework="torch", params=params, status=status, reason=reason,
                  measurement=m.to_dict() if status == "ok" else None, metrics=metrics)


def data(results: list[CaseResult], tmp_path: Path) -> ReportData:
    return report_data(results, run=run_row("r", study="ddp"), plot_dir=tmp_path / "plots")


def tables(sections: list[Any], words: str = "") -> list[Table]:
    return [s for s in sections if isinstance(s, Table) and words in s.title]


def throughput(sections: list[Any]) -> list[Table]:
    """The throughput tables (not the communication ones), in order."""
    return [t for t in tables(sections, "ddp ") if "comm/step" not in t.header]


def rows(t: Table) -> list[dict[str, str]]:
    return [dict(zip(t.header, r, strict=True)) for r in t.rows]


def notes(sections: list[Any]) -> list[str]:
    return [s.text for s in sections if isinstance(s, Note)]


def terminal(sections: list[Any], width: int = 400) -> str:
    buf = io.StringIO()
    render_terminal(sections, Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def test_efficiency_and_speed_up_against_hand_computed_numbers(tmp_path):
    """Strong scaling, global batch 8 images: 1 rank 100 ms (80 images/s), 2 ranks 62.5 ms (128 images/s: 128 /
    (2 x 80) = 80%, 1.60x), 4 ranks 50 ms (160 images/s: 160 / (4 x 80) = 50%, 2.00x)."""
    results = [ddp(1, 0.100), ddp(2, 0.0625, ranks=[0.060, 0.0625]), ddp(4, 0.050)]
    sections = dr.sections(data(results, tmp_path))
    (table,) = throughput(sections)
    by = {r["ranks"]: r for r in rows(table)}
    assert [r["ranks"] for r in rows(table)] == ["1", "2", "4"]
    assert (by["1"]["batch"], by["1"]["per rank"], by["4"]["per rank"]) == ("8", "8", "2")
    assert (by["1"]["median step"], by["2"]["median step"], by["4"]["median step"]) == ("100 ms", "62.5 ms", "50 ms")
    assert (by["1"]["images/s"], by["2"]["images/s"], by["4"]["images/s"]) == ("80", "128", "160")
    assert (by["1"]["efficiency"], by["2"]["efficiency"], by["4"]["efficiency"]) == ("100%", "80%", "50%")
    assert (by["1"]["speed-up"], by["2"]["speed-up"], by["4"]["speed-up"]) == ("1.00x", "1.60x", "2.00x")
    assert by["2"]["steps"] == "11" and by["2"]["95% interval"] == "60-65 ms"  # order statistics 2 and 10 of 11
    assert "status" not in by["1"]  # every case ok: no status column
    assert dr.efficiency(128.0, 80.0, 2) == 0.8
    assert table.title.startswith("ddp strong scaling: cnn lenet5 32px, torch cpu gloo: the global batch stays fixed")
    assert table.intro == ("Fixed: global batch 8 split over the ranks, 1 thread(s) per rank, DDP bucket 25 MiB, 1 "
                           "node. Batch: the global batch (one step's samples over all ranks).")
    (comm,) = tables(sections, "communication")
    c = {r["ranks"]: r for r in rows(comm)}
    assert (c["2"]["comm/step"], c["2"]["profiled step"], c["2"]["comm share"]) == ("20 ms", "70 ms", "28.6%")
    assert (c["2"]["slowest rank"], c["2"]["fastest rank"], c["2"]["spread"]) == ("62.5 ms (r1)", "60 ms (r0)",
                                                                                   "+4.2%")
    assert c["1"]["comm/step"] == "-" and c["1"]["spread"] == "+0.0%"
    said = notes(sections)
    assert "comm note (world size 1): one rank: DDP does not communicate" in said
    assert "comm note (world size 2, 4): DDP overlaps the all-reduce with the backward pass" in said
    assert any(n.startswith("communication: each rank's collective ops") and "smallest over the ranks" in n
               for n in said)
    (fig,) = [s for s in sections if isinstance(s, Figure)]
    assert [p.name for p in fig.paths] == ["ddp-scaling.png", "ddp-scaling.svg"]
    svg = fig.paths[1].read_text()
    assert "ideal: N x world size 1" in svg and "ideal 100%" in svg and "images/s" in svg
    panels = dr.plot_panels(dr.series(results))
    (panel,) = panels.values()
    assert panel["base"] == 80.0 and [(n, round(r, 6), e) for n, r, e in panel["points"]] == [
        (1, 80.0, 1.0), (2, 128.0, 0.8), (4, 160.0, 0.5)]


def test_strong_and_weak_series_are_apart_and_say_what_stays_fixed(tmp_path):
    """Weak: 4 images per rank; 1 rank 50 ms (80 images/s), 2 ranks 55 ms (8 / 0.055 = 145.45 images/s: 145.45 /
    160 = 91%, 1.82x); the strong series beside it keeps its own world size 1."""
    results = [ddp(2, 0.055, scaling="weak", batch=4), ddp(1, 0.050, scaling="weak", batch=4),
               ddp(1, 0.100), ddp(2, 0.0625)]
    sections = dr.sections(data(results, tmp_path))
    headings = [s.text for s in sections if isinstance(s, Heading)]
    assert headings[1:3] == ["## Strong scaling", "## Weak scaling"]
    strong, weak = throughput(sections)
    assert "strong" in strong.title and "weak" in weak.title
    assert "each rank's batch stays fixed (the global batch grows with the ranks)" in weak.title
    assert weak.intro is not None and weak.intro.startswith("Fixed: batch 4 per rank,")
    w = {r["ranks"]: r for r in rows(weak)}
    assert (w["1"]["batch"], w["2"]["batch"], w["2"]["per rank"]) == ("4", "8", "4")
    assert (w["2"]["images/s"], w["2"]["efficiency"], w["2"]["speed-up"]) == ("145", "91%", "1.82x")
    assert {r["ranks"]: r["efficiency"] for r in rows(strong)} == {"1": "100%", "2": "80%"}
    titles = [s.title for s in sections if isinstance(s, Table)]
    assert titles.index(strong.title) < titles.index(weak.title)


def test_a_missing_or_failed_world_size_1_case_gives_a_dash_and_the_reason(tmp_path):
    alone = [ddp(2, 0.06), ddp(4, 0.05)]
    sections = dr.sections(data(alone, tmp_path))
    (table,) = throughput(sections)
    assert {r["ranks"]: (r["efficiency"], r["speed-up"]) for r in rows(table)} == {"2": ("-", "-"), "4": ("-", "-")}
    assert "efficiency and speed-up: -: no world size 1 case of these parameters in this run" in notes(sections)
    svg = next(s for s in sections if isinstance(s, Figure)).paths[1].read_text()
    assert "no efficiency: no world size 1 case ran in this series" in svg
    oom = [ddp(1, None, status="oom", reason="rank 0 ran out of memory"), ddp(2, 0.06)]
    sections = dr.sections(data(oom, tmp_path))
    (table,) = throughput(sections)
    one, two = rows(table)
    assert (one["status"], one["median step"], one["images/s"]) == ("oom", "- [1]", "-")
    assert (two["status"], two["efficiency"]) == ("ok", "-")
    said = notes(sections)
    assert ("efficiency and speed-up: -: the world size 1 case ended oom (rank 0 ran out of memory)") in said
    assert "[1] world size 1: oom: rank 0 ran out of memory" in said


def test_failed_cases_keep_their_row_with_their_status(tmp_path):
    results = [ddp(1, 0.1), ddp(2, 0.0625), ddp(4, None, status="timeout", reason="no result within 600 s"),
               ddp(8, None, status="crashed", reason="rank 3 killed by SIGKILL"),
               ddp(2, 0.0625, rep=1), ddp(2, None, status="error", reason="gloo: connection reset", rep=2)]
    sections = dr.sections(data(results, tmp_path))
    (table,) = throughput(sections)
    by = {r["ranks"]: r for r in rows(table)}
    assert list(by) == ["1", "2", "4", "8"]
    assert (by["4"]["status"], by["4"]["median step"], by["4"]["per rank"]) == ("timeout", "- [2]", "2")
    assert (by["8"]["status"], by["8"]["median step"], by["8"]["batch"]) == ("crashed", "- [3]", "8")
    assert by["2"]["status"] == "2/3 ok" and by["2"]["median step"] == "62.5 ms [1]"
    assert by["2"]["steps"] == "22"  # two ok repetitions pooled
    said = notes(sections)
    assert "[1] world size 2: 1 of 3 repetitions error: gloo: connection reset" in said
    assert "[2] world size 4: timeout: no result within 600 s" in said
    assert "[3] world size 8: crashed: rank 3 killed by SIGKILL" in said
    (comm,) = tables(sections, "communication")
    assert [r["ranks"] for r in rows(comm)] == ["1", "2"]  # only world sizes that ran


def test_contended_figures_are_marked_and_the_registry_notes_them(tmp_path):
    results = [ddp(1, 0.1), ddp(2, 0.0625), ddp(1, 0.05, scaling="weak", batch=4)]
    for i in (1, 2):
        judged = results[i].m.model_copy(update={"validity": "contended", "validity_reason": "other work"})
        results[i] = results[i].model_copy(update={"metrics": judged})
    assert REPORTS["ddp"] is dr.sections
    sections = study_sections(data(results, tmp_path))
    strong, weak = throughput(sections)
    assert rows(strong)[1]["median step"] == "62.5 ms (c)" and rows(strong)[0]["median step"] == "100 ms"
    assert rows(weak)[0]["median step"] == "50 ms (c)"
    said = notes(sections)
    assert sum(n.startswith("(c) contended:") for n in said) == 1  # the legend once, under the last table
    assert any(n.startswith("validity: 2 contended of the ddp figures above") for n in said)


def test_tokens_for_the_transformer_and_every_table_fits_120_columns(tmp_path):
    results = [ddp(1, 0.2, workload="transformer", model="gpt2-tiny", batch=4),
               ddp(2, 0.12, workload="transformer", model="gpt2-tiny", batch=4),
               ddp(4, None, workload="transformer", model="gpt2-tiny", batch=4, status="unsupported",
                   reason="4 ranks need 4 GPUs; 1 found"),
               ddp(2, 0.0625, ranks=[0.0611, 0.0625]), ddp(1, 0.1)]
    sections = dr.sections(data(results, tmp_path))
    tok = next(t for t in tables(sections, "transformer gpt2-tiny T=16"))
    assert "tokens/s" in tok.header
    assert rows(tok)[0]["tokens/s"] == "320"  # 4 sequences x 16 tokens / 0.2 s
    for width in (120, 200):
        text = terminal(sections, width)
        assert "…" not in text
        lines = text.splitlines()
        for t in tables(sections):
            for word in t.header + [c for row in t.rows for c in row]:
                assert any(word in line for line in lines), (width, word)
        assert max(len(line) for line in lines if line.startswith(("┃", "│", "┏", "┡", "└"))) <= width


def test_the_progress_line_names_world_size_samples_per_s_and_efficiency():
    from dlperf.cli.progress import ConsoleEvents

    buf = io.StringIO()
    events = ConsoleEvents(Console(file=buf, width=300, color_system=None))
    events.case_done(1, 3, ddp(1, 0.1))
    events.case_done(2, 3, ddp(2, 0.0625))
    events.case_done(3, 3, ddp(4, None, status="timeout", reason="no result within 600 s"))
    first, second, third = buf.getvalue().splitlines()
    assert first.endswith(": ok median 100 ms (IQR 5.0%, n=11), world size 1: 80 images/s"), first
    assert second.endswith(": ok median 62.5 ms (IQR 5.0%, n=11), world size 2: 128 images/s, scaling "
                           "efficiency 80% (vs world size 1)"), second
    assert third.endswith(": timeout no result within 600 s")
    assert re.match(r"\[2/3\] ddp/torch/cpu/", second)


def test_dlperf_report_draws_the_ddp_sections_in_markdown_and_html(tmp_path, monkeypatch):
    """A store with a ddp run (written as the runner writes results): `dlperf report RUN` in the terminal,
    Markdown and HTML shows the scaling table and the plot."""
    from dlperf.cli import main
    from dlperf.hardware.identity import identity_hash
    from dlperf.store import Store
    from tests.history_store import environment

    store = Store(tmp_path / "s.sqlite")
    fp = environment("m1")
    env_id = store.environment_id(fp, identity_hash(fp))
    run_id = store.create_run(study="ddp", variant="quick", study_hash="h", study_path="p", filters={},
                              settings={"threads": 2}, env_id=env_id, n_cases=3, dlperf_version="0.1.0",
                              derived={})
    for r in (ddp(1, 0.1), ddp(2, 0.0625), ddp(4, None, status="timeout", reason="no result within 600 s")):
        store.add_result(r.model_copy(update={"run_id": run_id, "env_id": env_id}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLPERF_DB", str(tmp_path / "s.sqlite"))
    monkeypatch.setenv("COLUMNS", "120")
    for fmt, out in (("markdown", "r.md"), ("html", "r.html")):
        with pytest.raises(SystemExit) as exc:
            main(["report", run_id, "--format", fmt, "-o", str(tmp_path / out)])
        assert exc.value.code in (0, None)
    md, page = (tmp_path / "r.md").read_text(), (tmp_path / "r.html").read_text()
    assert "## Strong scaling" in md and "| 2 | 8 | 4 | 62.5 ms |" in md and "80%" in md
    assert "ddp-scaling.png" in md and "| 4 | 8 | 2 | - [1] |" in md and "timeout" in md
    assert "Strong scaling" in page and "1.60x" in page and "no result within 600 s" in page and "<svg" in page
