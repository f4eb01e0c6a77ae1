"""The compiler variants' report on synthetic stored results: the speed-up over eager with its interval, the
break-even calls from the compile times, no ratio where a side is contended or the variant failed the gate, the
variant names checked, and the runtimes refusing a compiler variant with the reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from dlperf.core.result import CaseResult, Metrics
from dlperf.report.compiler_report import group_table, grouped
from dlperf.report.sections import Note, Table


def result(variant: str, scale_s: float, seed: int, *, status: str = "ok", validity: str | None = None,
           gate: str = "pass", compile_s: tuple[float, float] | None = None,
           warm_error: str | None = None) -> CaseResult:
    """One stored repetition of a model case: seeded per-call times around `scale_s`, its gate and compile."""
    now = datetime.now(UTC)
    times = list(scale_s * np.random.default_rng(seed).lognormal(0.0, 0.03, 300))
    extra: dict[str, Any] = {"correctness": {"status": gate, "reason": "output 0: too far" if gate == "fail"
                                             else None}}
    if compile_s:
        extra["compile"] = {"variant": variant, "cold_s": compile_s[0], "warm_s": compile_s[1],
                            "graph_breaks": 0, "graphs": 1, "break_reasons": []}
        if warm_error:
            extra["compile"] = extra["compile"] | {"warm_s": None, "warm_error": warm_error,
                                                   "graph_breaks_error": "explain raised KeyError: 'x'"}
    metrics = Metrics(validity=validity, validity_reason="other processes were busy" if validity else None,
                      peak_rss_bytes=(300 if compile_s else 200) * 2**20, baseline_rss_bytes=100 * 2**20, **extra)
    ok = status == "ok"
    return CaseResult(run_id="r", case_key=f"model/torch/cpu/batch=1,variant={variant}", repetition=seed,
                      workload="model", framework="torch", device="cpu",
                      params={"source": "m.py:Net", "batch": 1, "variant": variant}, status=status,
                      reason=None if ok else "variant x records CUDA graphs: CUDA only, not cpu",
                      measurement={"sample_times_s": times, "sample_iters": [1] * len(times)} if ok else None,
                      metrics=metrics if ok else None, env_id=1, started_at=now, finished_at=now)


def rows_of(results: list[CaseResult]) -> tuple[dict[str, list[str]], list[str]]:
    ((group, variants),) = grouped(results).items()
    out = group_table(group, variants)
    table = next(s for s in out if isinstance(s, Table))
    return {r[0]: r for r in table.rows}, [s.text for s in out if isinstance(s, Note)]


def test_a_faster_variant_has_its_speedup_interval_and_break_even() -> None:
    rows, _ = rows_of([result("eager", 2e-3, 1), result("compile", 1e-3, 2, compile_s=(10.0, 2.0))])
    assert rows["eager"][3] == "reference"
    speed = rows["compile"][3]
    point, low, high = float(speed.split("x")[0]), *map(float, speed.split("(")[1].rstrip(")").split("-"))
    assert point == pytest.approx(2.0, rel=0.02) and 1.9 < low < point < high < 2.1
    assert rows["compile"][4] == "10 s" and rows["compile"][5] == "2 s"
    assert rows["compile"][8] == "200 MiB (2.00x)" and rows["eager"][8] == "100 MiB (1.00x)"
    # 1 ms saved per call: 10 s of cold compile is won back after about 10,000 calls, 2 s of warm after 2,000
    cold, warm = (int(x.replace(",", "")) for x in rows["compile"][6].split(" / "))
    assert cold == pytest.approx(10_000, rel=0.05) and warm == pytest.approx(2_000, rel=0.05)


def test_a_slower_variant_has_no_break_even() -> None:
    rows, _ = rows_of([result("eager", 1e-3, 1), result("compile", 2e-3, 2, compile_s=(10.0, 2.0))])
    assert rows["compile"][3].startswith("0.5") and rows["compile"][6] == "-"


def test_a_failed_warm_compile_or_explain_is_said_and_break_even_has_the_cold_one_only() -> None:
    rows, notes = rows_of([result("eager", 2e-3, 1), result("compile", 1e-3, 2, compile_s=(10.0, 2.0),
                                                            warm_error="the warm compile raised OSError: disk")])
    assert rows["compile"][5] == "-" and " / " not in rows["compile"][6]
    assert "compile: no warm compile: the warm compile raised OSError: disk" in notes
    assert "compile: graph breaks not counted: explain raised KeyError: 'x'" in notes


def test_no_speedup_from_a_failed_gate_a_contended_side_or_an_unsupported_case() -> None:
    rows, notes = rows_of([result("eager", 2e-3, 1), result("compile", 1e-3, 2, gate="fail", compile_s=(9, 1)),
                           result("compile:max-autotune-no-cudagraphs", 1e-3, 3, validity="contended",
                                  compile_s=(9, 1)),
                           result("compile:reduce-overhead", 1e-3, 4, status="unsupported")])
    assert rows["compile"][3] == "FAIL: not comparable" and rows["compile"][6] == "-"
    assert rows["compile:max-autotune-no-cudagraphs"][3] == "- (contended)"
    assert rows["compile:reduce-overhead"][3] == "- (unsupported)"
    said = " ".join(notes)
    assert "compile: fail: output 0: too far" in said
    assert "compile:max-autotune-no-cudagraphs: no speed-up: every compile:max-autotune-no-cudagraphs process " \
           "was contended" in said
    assert "compile:reduce-overhead: unsupported: variant x records CUDA graphs" in said


def test_a_runtime_refuses_a_compiler_variant_with_the_reason() -> None:
    from dlperf.frameworks import UnsupportedError, get_framework
    from dlperf.workloads import get_workload

    w = get_workload("model")
    params = w.parse({"source": "dlperf:lenet5", "variant": "export"})
    with pytest.raises(UnsupportedError, match="variant export is a torch compiler; onnxruntime runs eager and its "
                                               "own variants only"):
        w.build(get_framework("onnxruntime"), "cpu", params)
    with pytest.raises(UnsupportedError, match="variant xla is a tensorflow mode; torch runs eager and its own "
                                               "variants only"):
        w.build(get_framework("torch"), "cpu", w.parse({"source": "dlperf:lenet5", "variant": "xla"}))
    with pytest.raises(ValueError, match="unknown variant 'tensorrt'"):
        w.parse({"source": "dlperf:lenet5", "variant": "tensorrt"})


def test_the_speedup_against_batch_is_plotted_where_a_variant_ran_at_two_batches(tmp_path) -> None:
    """Batch 1: compile 2x faster; batch 8: 1.25x; its points carry those speed-ups with intervals around them,
    and the figure is written. A variant at one batch only has no line (nothing to draw against batch)."""
    from dlperf.report.compiler_report import sections, speedup_points
    from dlperf.report.sections import Figure
    from tests.factories import report_data

    def at(r: CaseResult, batch: int) -> CaseResult:
        key = r.case_key.replace("batch=1", f"batch={batch}")
        return r.model_copy(update={"params": r.params | {"batch": batch}, "case_key": key})

    rows = [result("eager", 2e-3, 1), result("compile", 1e-3, 2, compile_s=(10.0, 2.0)),
            at(result("eager", 8e-3, 3), 8), at(result("compile", 6.4e-3, 4, compile_s=(10.0, 2.0)), 8),
            result("export", 1.5e-3, 5, compile_s=(20.0, 5.0))]
    points = speedup_points(grouped(rows))
    ((title, lines),) = points.items()
    assert title == "m.py:Net (infer): torch cpu fp32" and set(lines) == {"compile", "export"}
    (b1, s1, lo1, hi1), (b8, s8, lo8, hi8) = sorted(lines["compile"])
    assert (b1, b8) == (1, 8) and s1 == pytest.approx(2.0, rel=0.02) and s8 == pytest.approx(1.25, rel=0.02)
    assert lo1 < s1 < hi1 and lo8 < s8 < hi8
    out = sections(report_data(rows, plot_dir=tmp_path))
    (fig,) = [s for s in out if isinstance(s, Figure)]
    assert all(p.stat().st_size > 0 for p in fig.paths) and {p.suffix for p in fig.paths} == {".png", ".svg"}
