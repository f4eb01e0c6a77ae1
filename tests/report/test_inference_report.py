"""The inference report on synthetic stored cnn and transformer `task: infer` cases: latency per batch (median and
its 95% interval, repetitions pooled), latency over torch's, throughput in the workload's samples, memory above the
framework's baseline and the device peak with its source, failed cases with their reason, the latency-vs-batch plot;
and the cnn report never shows an inference case as a training step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dlperf.core.result import CaseResult
from dlperf.report import cnn_report
from dlperf.report import inference_report as ir
from dlperf.report.registry import STUDIES, study_sections
from dlperf.report.sections import Figure, Heading, Note, Table, render_terminal
from dlperf.report.study import ReportData
from dlperf.runner.derive import derive_metrics
from dlperf.timing import Measurement
from dlperf.timing.stats import median_ci
from dlperf.units import format_time
from dlperf.workloads import Cost
from tests.factories import report_data, run_row, stored

MIB = 2**20


def case(workload: str, framework: str, params: dict[str, Any], times: list[float] | None, samples: int,
         status: str = "ok", reason: str | None = None, rep: int = 0, device: str = "cpu",
         memory: dict[str, Any] | None = None) -> CaseResult:
    m = Measurement(sample_times_s=tuple(times or ()), sample_iters=(1,) * len(times or ()))
    metrics = None
    if status == "ok":
        metrics = derive_metrics(m, Cost(flops=1e9, samples=samples)) | {"threads": 2, "device": device}
        metrics |= memory if memory is not None else {"peak_rss_bytes": 900 * MIB, "baseline_rss_bytes": 700 * MIB}
    return stored(f"{workload}/{framework}/{device}/{sorted(params.items())}", rep=rep, workload=workload,
                  framework=framework, device=device, params=params, status=status, reason=reason,
                  measurement=m.to_dict() if status == "ok" else None, metrics=metrics)


def times(centre: float, n: int = 40, seed: int = 0) -> list[float]:
    return list(np.random.default_rng(seed).uniform(0.95 * centre, 1.05 * centre, n))


def cnn_infer(framework: str, batch: int, centre: float, **kw: Any) -> CaseResult:
    return case("cnn", framework, {"model": "alexnet", "task": "infer", "batch": batch}, times(centre, seed=batch),
                batch, **kw)


def data(results: list[CaseResult], tmp_path: Path, study: str = "inference") -> ReportData:
    return report_data(results, run=run_row("r", study=study), plot_dir=tmp_path / "plots")


def rows(t: Table) -> list[dict[str, str]]:
    return [dict(zip(t.header, r, strict=True)) for r in t.rows]


def test_latency_interval_ratio_throughput_and_memory_per_framework_and_batch(tmp_path):
    results = [cnn_infer(fw, b, c * b) for fw, c in (("torch", 0.010), ("onnxruntime", 0.005)) for b in (1, 4)]
    results.append(cnn_infer("onnxruntime", 1, 0.005, rep=1))  # a second repetition is pooled
    gpu = {"peak_rss_bytes": 900 * MIB, "baseline_rss_bytes": 700 * MIB, "peak_device_mem_bytes": 300 * MIB,
           "peak_device_mem_source": "torch.cuda.max_memory_allocated"}
    results.append(cnn_infer("torch", 1, 0.001, device="cuda:0", memory=gpu))
    sections = ir.sections(data(results, tmp_path))
    (table,) = [s for s in sections if isinstance(s, Table)]
    assert table.title.startswith("inference cnn alexnet 227px: latency per call, images/s")
    by = {(r["framework"], r["device"], r["batch"]): r for r in rows(table)}
    ort = by[("onnxruntime", "cpu", "1")]
    pooled = sorted(t for r in results[2:5:2] for t in Measurement.from_dict(r.measurement or {}).times_s)
    assert ort["calls"] == "80"
    assert ort["median"] == format_time(float(np.median(pooled)))
    low, high = median_ci(pooled) or (0.0, 0.0)
    assert ort["95% interval"] == f"{format_time(low).split()[0]}-{format_time(high)}"  # same unit: written once
    torch1 = float(np.median(Measurement.from_dict(results[0].measurement or {}).times_s))
    assert ort["vs torch"] == f"{float(np.median(pooled)) / torch1:.2f}x"
    assert by[("torch", "cpu", "1")]["vs torch"] == "1.00x"
    assert ort["images/s"] == f"{1 / float(np.median(pooled)):.3g}"
    assert ort["host memory (above baseline)"] == "200 MiB" and ort["device memory"] == "-"
    cuda = by[("torch", "cuda:0", "1")]
    assert cuda["device memory"] == "300 MiB (torch.cuda.max_memory_allocated)"
    assert cuda["vs torch"] == "1.00x"  # against torch on its own device, not the CPU's
    (fig,) = [s for s in sections if isinstance(s, Figure)]
    assert fig.paths[0].name == "inference-latency-per-batch-cnn.png" and fig.paths[0].stat().st_size  # cnn only
    panels = ir.plot_panels(ir.grouped(ir.infer_results(results)))
    assert [label for label, _ in panels["cnn alexnet 227px"]] == ["onnxruntime cpu", "torch cpu", "torch cuda:0"]
    assert [p[0] for p in dict(panels["cnn alexnet 227px"])["torch cpu"]] == [1, 4]


def test_transformer_tokens_per_s_failed_cases_and_missing_memory(tmp_path):
    params = {"model": "gpt2-tiny", "task": "infer", "batch": 2, "seq_len": 64, "precision": "fp32"}
    ok = case("transformer", "numpy", params, times(0.02), 128, memory={"peak_rss_bytes": 500 * MIB})
    bad = case("transformer", "openvino", params, None, 0, status="unsupported", reason="openvino is not installed")
    train = case("transformer", "torch", params | {"task": "train"}, times(0.05), 128)  # not an inference case
    (table,) = [s for s in ir.sections(data([ok, bad, train], tmp_path)) if isinstance(s, Table)]
    assert table.title.startswith("inference transformer gpt2-tiny T=64: latency per call, tokens/s")
    by = {r["framework"]: r for r in rows(table)}
    assert set(by) == {"numpy", "openvino"}
    assert by["numpy"]["tokens/s"] == f"{128 / float(np.median(times(0.02))) / 1e3:.3g}k"
    assert by["numpy"]["host memory (above baseline)"] == "- (baseline RSS not recorded)"
    assert by["numpy"]["vs torch"] == "-"
    assert "device memory" not in table.header and "status" not in table.header  # every case on the CPU
    assert by["openvino"]["median"] == "- [1]"
    notes = [s.text for s in ir.sections(data([ok, bad, train], tmp_path)) if isinstance(s, Note)]
    assert "[1] openvino cpu fp32 batch 2: unsupported: openvino is not installed" in notes
    assert any(n.startswith("vs torch: the median over torch's") and "no torch case" in n for n in notes)
    assert by["openvino"]["host memory (above baseline)"] == "- (not measured)"


def test_cnn_inference_cases_are_never_shown_as_training(tmp_path):
    train = [case("cnn", "torch", {"model": "alexnet", "batch": b}, times(0.05 * b), b) for b in (1, 2)]
    infer = [cnn_infer("torch", b, 0.01 * b) for b in (1, 2)] + [cnn_infer("onnxruntime", 1, 0.004)]
    sections = cnn_report.sections(data(train + infer, tmp_path, study="cnn"))
    training = next(s for s in sections if isinstance(s, Table) and s.title.startswith("study 001 layout"))
    assert len(training.rows) == 2  # the two training cases only
    assert all(r[6] == "ok" for r in training.rows)
    largest = next(s for s in sections if isinstance(s, Table) and s.title.startswith("largest batch"))
    assert [r[1] for r in largest.rows] == ["torch"]
    inference = [s for s in sections if isinstance(s, Table) and s.title.startswith("inference cnn alexnet")]
    assert len(inference) == 1 and len(inference[0].rows) == 3
    assert "training" not in inference[0].title and "step" not in inference[0].title
    assert cnn_report.plot_series(train + infer) == cnn_report.plot_series(train)
    # an inference-only run: no study-001 training layout at all
    only = cnn_report.sections(data(infer, tmp_path, study="cnn"))
    assert not any(isinstance(s, Heading) and "training" in s.text for s in only)
    assert [s.title for s in only if isinstance(s, Table)] == [inference[0].title]


def test_the_inference_study_draws_each_inference_table_once(tmp_path):
    assert STUDIES["inference"] is ir.sections
    infer = [cnn_infer("torch", 1, 0.01), cnn_infer("onnxruntime", 1, 0.004)]
    transformer = case("transformer", "torch", {"model": "gpt2-tiny", "task": "infer", "batch": 1, "seq_len": 32},
                       times(0.01), 32)
    drawn = study_sections(data([*infer, transformer], tmp_path))
    titles = [s.title for s in drawn if isinstance(s, Table) and s.title.startswith("inference ")]
    assert titles == ["inference cnn alexnet 227px: latency per call, images/s and memory per framework/runtime "
                      "and batch", "inference transformer gpt2-tiny T=32: latency per call, tokens/s and memory per "
                      "framework/runtime and batch"]
    # outside the inference study the cnn report draws its own inference cases
    drawn = study_sections(data(infer, tmp_path, study="cnn_tiny"))
    assert sum(1 for s in drawn if isinstance(s, Table) and s.title.startswith("inference cnn")) == 1
    assert ir.sections(data([], tmp_path)) == []


def test_training_claims_and_measured_efficiency_leave_inference_cases_out(tmp_path):
    """Study 001's claims (TensorFlow trains faster than Caffe) and `hw measured`'s training efficiency are of
    training steps: an inference case at the same point never enters, and a run of inference cases alone cannot
    decide them."""
    import pytest

    from dlperf.analysis.picking import CannotCheck, Trail
    from dlperf.claims.loader import load_claims
    from dlperf.claims.rules_cnn import _pair
    from dlperf.hardware.measured import cnn_rows

    claim = next(c for c in load_claims() if c.rule == "cnn_faster" and c.params["device"] == "cpu")
    train = [case("cnn", fw, {"model": "alexnet", "batch": 2}, times(t), 2) for fw, t in (("caffe", 0.3),
                                                                                           ("tensorflow", 0.2))]
    infer = [case("cnn", fw, {"model": "alexnet", "task": "infer", "batch": 2}, times(0.01), 2)
             for fw in ("caffe", "tensorflow")]
    slow, fast = _pair(claim, data(train + infer, tmp_path, study="cnn"), Trail(), "cpu")
    assert [r.params.get("task", "train") for rs in (*slow.values(), *fast.values()) for r in rs] == ["train"] * 2
    with pytest.raises(CannotCheck):
        _pair(claim, data(infer, tmp_path, study="inference"), Trail(), "cpu")
    host = {"cpu_model": "AMD EPYC 7B13", "threads": 2, "cpu_physical_cores": 2, "gpus": [],
            "cpu_peaks_theoretical": {"fp32_flops_per_s": 1e11, "mem_bw_bytes_per_s": 5e10}}
    rows_ = cnn_rows(train[1:] + infer[1:], {"r": host}, [])
    assert len(rows_) == 1 and rows_[0]["images_per_s"] == pytest.approx(train[1].m.samples_per_s)


def test_the_table_fits_120_columns_whole_and_the_validity_note_follows_it(tmp_path):
    """At 120 columns every header and value of an inference table is whole (the host-memory column wraps, the
    median does not); in an `inference` run a contended case's validity line comes after the inference tables
    it speaks of."""
    import io

    from rich.console import Console

    results = [cnn_infer(fw, b, c * b) for fw, c in (("torch", 0.0201), ("onnxruntime", 0.0105),
                                                      ("openvino", 0.0109)) for b in (1, 16)]
    results.append(cnn_infer("tensorflow", 1, 0.01, status="timeout", reason="no result within 1800 s"))
    judged = results[0].metrics.model_copy(update={"validity": "contended", "validity_reason": "other work"})
    results[0] = results[0].model_copy(update={"metrics": judged})  # as stored: judged contended
    sections = study_sections(data(results, tmp_path))
    (table,) = [s for s in sections if isinstance(s, Table)]
    assert table.text_cols == (table.header.index("host memory (above baseline)"),)
    for width in (120, 200):
        buf = io.StringIO()
        render_terminal(sections, Console(file=buf, width=width, color_system=None))
        text = buf.getvalue()
        assert "…" not in text
        lines = text.splitlines()
        for word in table.header[:-1] + [c for row in table.rows for c in row[:-1]]:
            assert any(word in line for line in lines), word
        assert all(w in text for w in table.header[-1].split())
    kinds = [type(s).__name__ + ":" + getattr(s, "text", getattr(s, "title", ""))[:12] for s in sections]
    where = next(i for i, k in enumerate(kinds) if k.startswith("Note:validity: 1"))
    assert where > kinds.index("Table:" + table.title[:12])
