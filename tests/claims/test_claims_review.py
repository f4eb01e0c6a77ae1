"""The review of issue 15's claims: every op of a claim on several ops is checked, a framework with a dot
above the FP32 peak is not judged, an empty run given says so, a negative memory reading never counts, a
figure equal to the paper's says so, and the study reports' paper tables print the figures the verdicts judge."""

from __future__ import annotations

from typing import Any

from dlperf.claims import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS
from dlperf.claims.loader import load_claims
from dlperf.core.result import CaseResult
from dlperf.report.backends_report import paper_speedups
from dlperf.report.mlp_report import paper_rows
from dlperf.studies import paper
from tests.claims.test_claims import GPU_ENV, case, frameworks, judge, mlp, nn, op, run
from tests.factories import report_data, run_row


def test_the_elementwise_claim_needs_a_case_of_every_op() -> None:
    only_add = [op("add", s, 20) for s in (2, 8)]  # 0.31%: under 1%, but mul and scalar never ran
    v = judge("002-elementwise-under-1pct", [run(only_add, env=GPU_ENV)])
    assert v.verdict == CANNOT_CHECK and v.measured is None, v.detail
    assert "mul, scalar: no float32 case on cuda in run run-a" in v.detail
    failed = [*only_add, op("scalar", 2, 20), case("ops", "torch", "cuda", {"op": "mul", "size_mb": 2,
                                                                            "dtype": "float32"}, 0, status="error",
                                                   reason="CUDA out of memory")]
    v = judge("002-elementwise-under-1pct", [run(failed, env=GPU_ENV)])
    assert v.verdict == CANNOT_CHECK and "mul: float32 mul ended error in run run-a (CUDA out of memory)" in v.detail


def dot(framework: str, size_mb: float, gflops: float) -> CaseResult:
    return case("ops", framework, "cuda", {"op": "dot", "size_mb": size_mb, "dtype": "float32"}, 1.0 / gflops,
                flops_per_call=1e9, bytes_per_call=1e7, samples_per_call=None)


def test_a_framework_with_a_dot_above_the_fp32_peak_is_not_judged() -> None:
    # two sizes at 61.5% of the 6.5 TFLOP/s peak, one at 108%: the median of the rest would say 'holds'
    torch = [dot("torch", 5, 4000), dot("torch", 9, 4000), dot("torch", 17, 7000)]
    v = judge("002-dot-35-to-89pct", [run(torch, env=GPU_ENV)])
    assert v.verdict == CANNOT_CHECK and v.measured is None, v.detail
    assert "torch: above the FP32 compute peak: the peak or the precision is wrong, e.g. TF32" in v.detail
    # another framework with every point plausible decides; the implausible one is named, not judged
    jax = [dot("jax", s, 650) for s in (5, 9, 17)]  # 10%: below the band
    v = judge("002-dot-35-to-89pct", [run(torch + jax, env=GPU_ENV)])
    assert v.verdict == DOES_NOT_HOLD and v.measured == "jax 10%", v.detail
    assert "cannot check torch: above the FP32 compute peak" in v.detail


def test_a_given_run_with_no_case_of_the_workload_says_so() -> None:
    empty = report_data(run=run_row("mlp-empty", study="mlp", n_cases=5))
    v = judge("000-gpu-speedup-tensors-large", [empty])
    assert v.verdict == CANNOT_CHECK
    assert v.detail.startswith("run mlp-empty has no mlp results (complete, 0 of 5 cases stored); run `dlperf run")
    assert "no mlp run given" not in v.detail
    v = judge("004-gtx1070-fastest-gpu", [report_data(run=run_row("cnn-x", study="cnn", status="aborted", n_cases=3))])
    assert "run cnn-x has no cnn results (aborted, 0 of 3 cases stored)" in v.detail


def test_a_negative_memory_reading_never_counts() -> None:
    cases = frameworks("cpu", 1.5, caffe_mem=2e9)
    below = [case("cnn", "caffe", "cpu", {"model": "alexnet", "batch": b, "image_size": 112}, 0.015 * b,
                  samples_per_call=b, peak_rss_bytes=int(4e8), baseline_rss_bytes=int(5e8)) for b in (1, 8, 32)]
    v = judge("001-tf-less-memory", [run(cases + below)])
    # each alexnet point keeps its positive reading (2 GB over 1 GB), the -100 MB ones are left out
    assert v.verdict == HOLDS and v.measured == "tensorflow smaller at 6 of 6 points (2x to 2x)", v.detail
    assert "3 memory reading(s) at or below zero left out" in v.detail
    only_below = [c for c in cases if c.framework != "caffe"] + below
    v = judge("001-tf-less-memory", [run(only_below)])
    assert v.verdict == CANNOT_CHECK and "3 memory reading(s) at or below zero left out" in v.detail


def test_the_memory_claim_quotes_the_paper_without_naming_a_network() -> None:
    claim = next(c for c in load_claims() if c.id == "001-tf-less-memory")
    quoted = paper.load("study001_quoted").where(quantity="largest_batch_tensorflow")[0]
    assert quoted["model"] == "" and quoted["device"] == ""  # the sentence names neither
    assert "(Figure 1, GoogLeNet on the CPU)" not in claim.where and "network and device not stated" in claim.where


def test_a_figure_equal_to_the_papers_says_so() -> None:
    v = judge("003-seq-over-vec-mlp", [run([nn("nn-sequential", "mlp", 77e-3), nn("nn-vectorized", "mlp", 1e-3)])])
    assert v.verdict == HOLDS and "equal to the paper's 77x (within 0.5%)" in v.detail, v.detail
    assert "1x above" not in v.detail
    v = judge("003-seq-over-vec-mlp", [run([nn("nn-sequential", "mlp", 80e-3), nn("nn-vectorized", "mlp", 1e-3)])])
    assert "3.9% above the paper's 77x" in v.detail, v.detail


def _reps(make: Any, times_s: list[float], invalid_last: float | None = None) -> list[CaseResult]:
    out = [make(t) for t in times_s]
    return out + ([make(invalid_last, validity="invalid")] if invalid_last is not None else [])


def test_the_backends_paper_table_prints_the_verdicts_figure() -> None:
    # three repetitions (median 80 ms, the last 90 ms) and an invalid 5 ms stored last: 80x, not 90 / 5 = 18x
    results = (_reps(lambda t, **kw: nn("nn-sequential", "mlp", t, **kw), [70e-3, 80e-3, 90e-3])
               + _reps(lambda t, **kw: nn("nn-vectorized", "mlp", t, **kw), [1e-3], invalid_last=5e-3))
    v = judge("003-seq-over-vec-mlp", [run(results)])
    _, rows, points = paper_speedups(results)
    row = next(r for r in rows if r[:2] == ["mlp", "sequential / vectorized"])
    assert v.measured == "80x" and row[-1] == "80", (v.measured, row)
    assert points[0] == ("mlp: sequential / vectorized", 77.0, 80.0)
    only_invalid = [*results[:3], nn("nn-vectorized", "mlp", 1e-3, validity="invalid")]
    row = next(r for r in paper_speedups(only_invalid)[1] if r[:2] == ["mlp", "sequential / vectorized"])
    assert row[-1] == "missing here: nn-vectorized has only invalid measurements"


def test_the_mlp_paper_table_leaves_invalid_repetitions_out() -> None:
    results = [mlp("tensors", "large", "cpu", 0.876), mlp("tensors", "large", "cpu", 0.01, validity="invalid"),
               mlp("tensors", "large", "cuda", 0.01)]
    v = judge("000-gpu-speedup-tensors-large", [run(results)])
    row = next(r for r in paper_rows(results)[1] if r[:2] == ["tensors", "large"])
    assert v.measured == "87.6x" and row[3] == "87.6x (cuda)", (v.measured, row)
    dead = [mlp("tensors", "large", "cpu", 0.876, validity="invalid"), mlp("tensors", "large", "cuda", 0.01)]
    row = next(r for r in paper_rows(dead)[1] if r[:2] == ["tensors", "large"])
    assert row[3] == "missing here: only invalid measurements on cpu"
