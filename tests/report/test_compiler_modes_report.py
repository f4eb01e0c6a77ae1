"""The compiler-mode studies' report on synthetic stored results: each mode's time and first call, the speed-ups
jit/no-jit and xla/graph/eager with their intervals and break-even steps, no speed-up where a side is contended or
failed (the reason said), and the report registered for both studies."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dlperf.core.result import CaseResult, Metrics
from dlperf.report import compiler_modes_report as cm
from dlperf.report.registry import STUDIES
from dlperf.report.sections import Note, Table
from dlperf.report.study import ReportData
from dlperf.studies import load_study
from tests.factories import run_row

PARAMS = {"variant": "tensors", "size": "small", "iterations": 500, "lr": 1e-6, "dtype": "float32"}


def result(framework: str, scale_s: float, seed: int, *, first_s: float = 0.1, status: str = "ok",
           validity: str | None = None, params: dict | None = None, compile: dict | None = None) -> CaseResult:
    """One stored repetition of an mlp case: seeded per-step times around `scale_s` and its first call."""
    now = datetime.now(UTC)
    times = list(scale_s * np.random.default_rng(seed).lognormal(0.0, 0.03, 300))
    ok = status == "ok"
    metrics = Metrics(first_call_s=first_s, validity=validity,
                      validity_reason="other processes used 1 core" if validity else None,
                      **({"compile": compile} if compile else {}))
    return CaseResult(run_id="r", case_key=f"mlp/{framework}/cpu/x", repetition=seed, workload="mlp",
                      framework=framework, device="cpu", params=params or PARAMS, status=status,
                      reason=None if ok else "jax is not installed",
                      measurement={"sample_times_s": times, "sample_iters": [1] * len(times)} if ok else None,
                      metrics=metrics if ok else None, env_id=1, started_at=now, finished_at=now)


def report(results: list[CaseResult]) -> tuple[Table, Table, list[str]]:
    data = ReportData(run=run_row(study="compilers_xla"), env={}, results=results, plot_dir=Path("."))
    out = cm.sections(data)
    times, speedups = (s for s in out if isinstance(s, Table))
    return times, speedups, [s.text for s in out if isinstance(s, Note)]


def interval(cell: str) -> tuple[float, float, float]:
    point, rest = cell.split("x (")
    low, high = rest.rstrip(")").split("-")
    return float(point), float(low), float(high)


def test_each_pair_has_its_speedup_interval_and_break_even() -> None:
    times, speedups, _ = report([result("jax", 1e-3, 1, first_s=0.2), result("jax-nojit", 4e-3, 2, first_s=0.5),
                                 result("tensorflow", 2e-3, 3, first_s=0.1),
                                 result("tensorflow-xla", 1e-3, 4, first_s=1.1),
                                 result("tensorflow-eager", 3e-3, 5, first_s=0.05)])
    assert [r[2] for r in times.rows] == list(cm.MODES)
    assert times.rows[0][0] == "size=small variant=tensors" and times.rows[0][5] == "200 ms"
    rows = {r[2]: r for r in speedups.rows}
    assert set(rows) == {"jit over no-jit", "xla over graph", "xla over eager", "graph over eager"}
    for what, want in (("jit over no-jit", 4.0), ("xla over graph", 2.0), ("xla over eager", 3.0),
                       ("graph over eager", 1.5)):
        point, low, high = interval(rows[what][3])
        assert point == pytest.approx(want, rel=0.03) and low <= point <= high and low < high, (what, rows[what][3])
    # xla: 1 s more first call, 1 ms saved per step: won back after about 1,000 steps
    assert int(rows["xla over graph"][5].replace(",", "")) == pytest.approx(1_000, rel=0.05)
    assert rows["xla over graph"][4] == "100 ms / 1.1 s"
    assert rows["jit over no-jit"][5] == "none (no extra first call)"  # jit's first call was the shorter one


def test_warm_compile_beside_the_first_call_with_its_hit_and_break_even() -> None:
    """The XLA modes' warm compile (a second fresh process on the filled cache) beside the cold first call: its
    median, whether the cache served it, the warm break-even; jax-nojit's 'no cache'; a failed warm noted."""
    hit = {"warm_s": 0.05, "warm_hit": True}
    times, speedups, notes = report([
        result("jax", 1e-3, 1, first_s=0.2, compile=hit), result("jax", 1e-3, 11, first_s=0.2,
                                                                   compile={"warm_s": 0.07, "warm_hit": True}),
        result("jax-nojit", 4e-3, 2, first_s=0.02, compile={"no_warm": "jax-nojit compiles no step"}),
        result("tensorflow", 2e-3, 3, first_s=0.1),
        result("tensorflow-xla", 1e-3, 4, first_s=1.1, compile={"warm_s": 0.6, "warm_hit": False}),
        result("tensorflow-eager", 3e-3, 5, first_s=0.05, compile={"warm_error": "the warm compile took over 600 s"})])
    warm = {r[2]: r[6] for r in times.rows}
    assert warm == {"jax": "60 ms (hit)", "jax-nojit": "- (no cache)", "tensorflow": "-",
                    "tensorflow-xla": "600 ms (no hit)", "tensorflow-eager": "-"}
    assert any("tensorflow-eager: no warm compile: the warm compile took over 600 s" in n for n in notes)
    rows = {r[2]: r for r in speedups.rows}
    # jit: 180 ms more cold than no-jit's first call, 40 ms more warm; 3 ms saved per step
    assert rows["jit over no-jit"][5] == "60" and rows["jit over no-jit"][6] == "60 ms"
    assert int(rows["jit over no-jit"][7]) == pytest.approx(13, abs=1)
    # xla over graph: 1 s cold, 500 ms warm more than the graph's first call, 1 ms saved per step
    assert int(rows["xla over graph"][7].replace(",", "")) == pytest.approx(500, rel=0.05)
    assert rows["graph over eager"][6] == "-" and rows["graph over eager"][7] == "-"


def test_a_contended_or_failed_side_gives_no_speedup_and_says_why() -> None:
    times, speedups, notes = report([result("jax", 1e-3, 1), result("jax-nojit", 4e-3, 2, validity="contended"),
                                     result("tensorflow", 2e-3, 3), result("tensorflow-xla", 1e-3, 4,
                                                                           status="unsupported")])
    rows = {r[2]: r for r in speedups.rows}
    assert rows["jit over no-jit"][3] == "- (contended)" and rows["jit over no-jit"][5] == "-"
    assert rows["xla over graph"][3] == "- (not comparable)"
    assert "xla over eager" not in rows  # no eager case: no pair
    assert next(r for r in times.rows if r[2] == "tensorflow-xla")[3] == "- (unsupported)"
    assert any("no speed-up for 1 pair" in n and "jit over no-jit" in n and "contended" in n for n in notes)
    assert any("tensorflow-xla: 1 of 1 repetitions unsupported: jax is not installed" in n for n in notes)


def test_the_case_label_names_what_varies() -> None:
    other = PARAMS | {"size": "medium", "dtype": "float64"}
    times, _, _ = report([result("jax", 1e-3, 1), result("jax", 2e-3, 2, params=other)])
    assert {r[0] for r in times.rows} == {"dtype=float32 size=small variant=tensors",
                                          "dtype=float64 size=medium variant=tensors"}


def test_registered_for_both_studies_and_silent_without_mode_results() -> None:
    assert STUDIES["compilers_xla"] is cm.sections and STUDIES["compilers_xla_transformer"] is cm.sections
    data = ReportData(run=run_row(study="compilers_xla"), env={}, results=[result("torch", 1e-3, 1)],
                      plot_dir=Path("."))
    assert cm.sections(data) == []


@pytest.mark.parametrize(("name", "workload", "quick_cases"), [("compilers_xla", "mlp", 10),
                                                                ("compilers_xla_transformer", "transformer", 10)])
def test_the_shipped_studies_run_every_mode(name, workload, quick_cases) -> None:
    full, quick = load_study(name), load_study(name, quick=True)
    assert full.workload == quick.workload == workload
    assert {c.framework for c in full.cases} == {c.framework for c in quick.cases} == set(cm.MODES)
    assert {c.device for c in full.cases} == {"cpu", "cuda"} and {c.device for c in quick.cases} == {"cpu"}
    assert len(quick.cases) == quick_cases  # 5 modes x 2 (mlp: tensors, autograd; transformer: train, infer)
    assert quick.settings.repetitions == 1 and full.settings.repetitions == 5
