"""The transformer report on synthetic stored results: tokens/s with its interval, MFU against the dtype's peak
(or the reason there is none), TTFT/TPOT percentiles, the KV cache's effect, the plots, the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dlperf.core.result import CaseResult
from dlperf.report import transformer_report as tr
from dlperf.report.registry import REPORTS, study_sections
from dlperf.report.sections import Figure, Note, Table
from dlperf.report.study import ReportData
from dlperf.runner.derive import derive_metrics
from dlperf.timing import Measurement
from dlperf.workloads import Cost
from tests.factories import report_data, stored

ENV = {"cpu_physical_cores": 4, "threads": 4,
       "cpu_peaks_theoretical": {"fp32_flops_per_s": 2e11, "peaks_source": "catalog entry test-cpu"}}


def _result(params: dict[str, Any], times: list[float], flops: float, tokens: int, status: str = "ok",
            phases: list[dict[str, float]] | None = None, framework: str = "numpy") -> CaseResult:
    m = Measurement(sample_times_s=tuple(times), sample_iters=(1,) * len(times), per_call=phases is not None)
    metrics = derive_metrics(m, Cost(flops=flops, samples=tokens)) if times else {}
    if phases is not None:
        metrics |= {"call_phases": phases, "first_call_phases": {"ttft_s": 0.9, "decode_s": 1.8}}
    full = {"model": "gpt2-tiny", "precision": "fp32", "batch": 1} | params
    return stored(f"transformer/{framework}/{sorted(full.items())}", workload="transformer", framework=framework,
                  params=full, status=status,
                  reason=None if status == "ok" else "workload 'transformer' has no torch implementation",
                  measurement=m.to_dict() if status == "ok" else None, metrics=metrics if status == "ok" else None)


def _data(results: list[CaseResult], tmp_path: Path) -> ReportData:
    return report_data(results, env=ENV, plot_dir=tmp_path / "plots")


def test_tokens_per_s_interval_and_mfu_against_the_dtypes_peak(tmp_path):
    rng = np.random.default_rng(0)
    times = list(rng.uniform(0.009, 0.011, 50))
    infer = _result({"task": "infer", "seq_len": 64, "batch": 4}, times, flops=1e9, tokens=256)
    bf16 = _result({"task": "train", "seq_len": 64, "batch": 4, "precision": "bf16"}, times, flops=3e9, tokens=256)
    header, rows, sources = tr.throughput_rows(_data([infer, bf16], tmp_path))
    row = dict(zip(header, next(r for r in rows if r[0] == "infer"), strict=True))
    median = float(np.median(times))
    assert row["tokens/s"] == f"{256 / median / 1e3:.3g}k"
    assert row["MFU"] == f"{100 * 1e9 / median / 2e11:.1f}%"
    lo, hi = row["95% interval"].split("-")
    assert float(lo.rstrip("k")) <= 256 / median / 1e3 <= float(hi.rstrip("k"))
    row = dict(zip(header, next(r for r in rows if r[0] == "train"), strict=True))
    assert row["MFU"] == "- (no bfloat16 peak for cpu here)"  # never a guess
    assert any("catalog entry test-cpu" in s for s in sources)


def test_mfu_peak_is_the_share_of_the_cores_the_threads_use():
    peak, source = tr.peak_for(ENV, "cpu", "float32", threads=1)
    assert peak == pytest.approx(5e10) and "1 of 4 cores" in source
    # a framework that does not control its threads (JAX) records none: held against the whole CPU
    assert tr.peak_for(ENV | {"threads": 1}, "cpu", "float32", threads=None)[0] == pytest.approx(2e11)
    assert tr.peak_for({}, "cuda", "bfloat16") == (None, "no bfloat16 peak for cuda here")


def test_cases_that_differ_in_a_shape_override_are_separate_rows(tmp_path):
    """Two depths of one preset are two models: never one row with the median of both (a reviewer's finding)."""
    rng = np.random.default_rng(3)
    two = _result({"task": "infer", "seq_len": 64, "n_layer": 2}, list(rng.uniform(0.009, 0.011, 20)), 1e9, 64)
    eight = _result({"task": "infer", "seq_len": 64, "n_layer": 8}, list(rng.uniform(0.039, 0.041, 20)), 4e9, 64)
    header, rows, _ = tr.throughput_rows(_data([two, eight], tmp_path))
    models = sorted(dict(zip(header, r, strict=True))["model"] for r in rows)
    assert models == ["gpt2-tiny n_layer=2", "gpt2-tiny n_layer=8"]
    assert tr.model_label({"model": "gpt2-tiny", "lr": 1e-4, "weight_decay": 0.01, "task": "train"}) == "gpt2-tiny"
    assert tr.model_label({"model": "gpt2-tiny", "lr": 1e-3, "weight_decay": 0.01}) == "gpt2-tiny lr=0.001"


def _gen(cache: bool, tpot_s: float, n: int = 120) -> CaseResult:
    rng = np.random.default_rng(1 if cache else 2)
    ttft = rng.uniform(0.010, 0.012, n)
    decode = tpot_s * 7 * rng.uniform(0.95, 1.05, n)
    phases = [{"ttft_s": float(a), "decode_s": float(b)} for a, b in zip(ttft, decode, strict=True)]
    return _result({"task": "generate", "prompt_len": 16, "new_tokens": 8, "kv_cache": cache, "batch": 2},
                   list(ttft + decode), flops=1e8, tokens=16, phases=phases)


def test_generation_tables_and_the_kv_cache_effect(tmp_path):
    with_cache, without = _gen(True, 0.001), _gen(False, 0.004)
    data = _data([with_cache, without, _result({"task": "infer", "seq_len": 8}, [], 0, 0, status="unsupported",
                                                framework="torch")], tmp_path)
    ttft, tpot, plotted = tr.generation_rows(data)
    assert len(ttft) == len(tpot) == len(plotted) == 2
    row = dict(zip(tr.TTFT_HEADER, next(r for r in ttft if "no cache" not in r[2]), strict=True))
    phases = with_cache.m.call_phases
    p90 = float(np.percentile([p["ttft_s"] for p in phases], 90))
    assert row["TTFT p90"].startswith(f"{p90 * 1e3:.3g} ms [")
    assert row["TTFT p99"].endswith("[n too small]")  # 120 calls: too few for p99's 95% interval
    assert row["first call"] == "900 ms" and row["calls"] == "120"
    row = dict(zip(tr.TPOT_HEADER, next(r for r in tpot if "no cache" not in r[2]), strict=True))
    decode_rate = float(np.median([2 * 7 / p["decode_s"] for p in phases]))
    assert row["decode tokens/s"].startswith(f"{decode_rate / 1e3:.3g}k [")  # the median, then its interval
    lo, hi = (float(x.rstrip("k")) * 1e3 for x in row["decode tokens/s"].split("[")[1].rstrip("]").split(", "))
    assert lo <= decode_rate <= hi
    header, rows = tr.kv_cache_rows(data)
    (kv,) = rows
    ratio = without.m.tpot_p50_s / with_cache.m.tpot_p50_s
    assert dict(zip(header, kv, strict=True))["without / with"] == f"{ratio:.2f}x" and 3.5 < ratio < 4.5

    sections = tr.sections(data)
    titles = [s.title for s in sections if isinstance(s, Table)]
    assert any("time to first token" in t for t in titles) and any("KV cache" in t for t in titles)
    notes = [s.text for s in sections if isinstance(s, Note)]
    assert any(n.startswith("torch: 1 transformer case(s) unsupported (workload 'transformer' has no torch") for n in
               notes)
    figures = [s for s in sections if isinstance(s, Figure)]
    assert [p.name for f in figures for p in f.paths] == ["transformer-ttft-tpot.png", "transformer-ttft-tpot.svg"]
    assert all(p.stat().st_size > 0 for f in figures for p in f.paths)


def test_registered_and_drawn_with_the_run(tmp_path):
    assert REPORTS["transformer"] is tr.sections
    rng = np.random.default_rng(3)
    results = [_result({"task": "infer", "seq_len": s, "batch": b}, list(rng.uniform(0.01, 0.02, 20)), 1e9, b * s)
               for s in (32, 64) for b in (1, 2, 4)]
    sections = study_sections(_data(results, tmp_path))
    (fig,) = [s for s in sections if isinstance(s, Figure)]
    assert fig.paths[0].name == "transformer-tokens-per-s.png" and fig.paths[0].stat().st_size > 0
    assert tr.sections(_data([], tmp_path)) == []


def test_mfu_says_what_the_peak_rests_on_and_never_hides_one_above_it(tmp_path):
    """The MFU's label carries the FP32 basis (measured, or the model with what it assumed) and the derived
    dtypes' labels; an MFU above 100% is said to be above the peak, never a bare figure."""
    cpu = {"fp32_flops_per_s": 2e11, "fp32_source": "measured", "bf16_flops_per_s": 4e11,
           "fp32_basis": "measured: 4 cores x 50.0 GFLOP/s per core, the AVX-512 FMA loop's throughput",
           "dtype_peaks_source": {"bf16": "derived (not measured): 4 cores x 3 GHz x 64/cycle"}}
    env = ENV | {"cpu_peaks_theoretical": cpu}
    assert "measured: 4 cores x 50.0 GFLOP/s per core" in tr.peak_for(env, "cpu", "float32", threads=4)[1]
    assert "derived (not measured)" in tr.peak_for(env, "cpu", "bfloat16", threads=4)[1]
    times = [0.001] * 8  # 1e9 FLOPs per ms: 1 TFLOP/s against a 0.2 TFLOP/s peak
    fast = _result({"task": "infer", "seq_len": 64, "batch": 4}, times, flops=1e9, tokens=256)
    header, rows, _ = tr.throughput_rows(report_data([fast], env=env, plot_dir=tmp_path / "plots"))
    mfu = dict(zip(header, rows[0], strict=True))["MFU"]
    assert mfu.startswith("500.0%") and mfu.endswith("(above the peak: the peak is too low)")
