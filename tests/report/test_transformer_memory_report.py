"""The transformer memory piece (report/transformer_memory.py) on synthetic results stored in and read back from a
store: each training case's measured peak beside the estimate (plus the baseline RSS on a CPU), and the ratio."""

from __future__ import annotations

import io

from rich.console import Console

from dlperf.core.result import Metrics
from dlperf.models.transformer import get_config
from dlperf.models.transformer.memory import train_memory
from dlperf.report import transformer_memory as TM
from dlperf.report.sections import Note, Table, render_markdown, render_terminal
from dlperf.report.study import ReportData
from dlperf.store import Store
from dlperf.units import format_mib
from tests.factories import case, report_data

MIB = 2**20
TRAIN = {"model": "gpt2-tiny", "task": "train", "batch": 4, "seq_len": 32}


def _stored(tmp_path, cases: list[tuple[str, str, dict, str, dict]]) -> ReportData:
    """Store (framework, device, params, status, metrics) as one run's results and read them back as ReportData."""
    store = Store(tmp_path / "r.sqlite")
    env_id = store.environment_id({"cpu_model": "test"}, "hash-test")
    run_id = store.create_run(study="transformer", variant="full", study_hash="h", study_path="p", filters={},
                              settings={}, env_id=env_id, n_cases=len(cases), dlperf_version="0")
    for i, (fw, device, params, status, metrics) in enumerate(cases):
        store.add_result(case(f"transformer/{fw}/{device}/{i}", run_id=run_id, workload="transformer", framework=fw,
                              device=device, params=params, status=status, metrics=Metrics(**metrics),
                              env_id=env_id))
    return report_data(store.results(run_id), run=store.run(run_id), plot_dir=tmp_path)


def test_measured_beside_the_estimate_with_the_ratio(tmp_path):
    cfg = get_config("gpt2-tiny")
    data = _stored(tmp_path, [
        ("torch", "cpu", TRAIN, "ok", {"peak_rss_bytes": 700 * MIB, "baseline_rss_bytes": 400 * MIB}),
        ("torch", "cuda", TRAIN | {"precision": "bf16"}, "ok", {"peak_device_mem_bytes": 40 * MIB}),
        ("jax", "cpu", TRAIN, "ok", {"peak_rss_bytes": 900 * MIB, "baseline_rss_bytes": 400 * MIB}),
        ("torch", "cpu", TRAIN | {"batch": 8}, "ok", {"peak_rss_bytes": 900 * MIB}),  # no baseline recorded
        ("torch", "cpu", TRAIN | {"batch": 4096}, "oom",
         {"peak_rss_bytes": 2000 * MIB, "baseline_rss_bytes": 400 * MIB}),
        ("torch", "cpu", {"model": "gpt2-tiny", "task": "generate", "prompt_len": 8, "new_tokens": 8}, "ok",
         {"peak_rss_bytes": 500 * MIB, "baseline_rss_bytes": 400 * MIB}),
    ])
    out = TM.sections(data)
    assert [type(s) for s in out] == [Table, Note]
    table = out[0]
    assert isinstance(table, Table) and len(table.rows) == 5  # the generate case is not a training step
    by = {(r[1], r[2], r[4]): dict(zip(table.header, r, strict=True)) for r in table.rows}

    cpu = by[("torch", "cpu", "4")]
    est_cpu = train_memory(cfg, 4, 32, attention="fused", where="host").total_bytes + 400 * MIB
    assert cpu["estimate"] == format_mib(est_cpu) and cpu["attention (assumed)"] == "fused"
    assert cpu["measured peak"] == f"{format_mib(700 * MIB)} (worker peak RSS)"
    assert cpu["measured / estimate"] == f"{700 * MIB / est_cpu:.2f}x"

    gpu = by[("torch", "cuda", "4")]
    est_gpu = train_memory(cfg, 4, 32, precision="bf16", attention="fused", where="device").total_bytes
    assert gpu["precision"] == "bf16" and gpu["estimate"] == format_mib(est_gpu)
    assert gpu["measured / estimate"] == f"{40 * MIB / est_gpu:.2f}x"

    jax = by[("jax", "cpu", "4")]
    assert jax["attention (assumed)"] == "math"
    # checked against PyTorch's saved tensors only: no ratio that would blame JAX for the model's blind spot
    assert jax["estimate"].startswith("- (the estimate's activation count is checked against PyTorch's saved tensors "
                                      "only; jax keeps its own set")
    assert jax["measured / estimate"] == "-"
    unknown = by[("torch", "cpu", "8")]
    assert unknown["estimate"] == "- (the framework's baseline RSS was not recorded)"
    assert unknown["measured / estimate"] == "-"

    oom = by[("torch", "cpu", "4096")]
    est_oom = train_memory(cfg, 4096, 32, where="host").total_bytes + 400 * MIB
    assert oom["status"] == "oom" and oom["measured / estimate"] == "-"  # measured, but the case never finished
    assert oom["estimate"] == format_mib(est_oom)

    console = Console(file=io.StringIO(), width=250)
    render_terminal(out, console)
    text = console.file.getvalue()
    assert "measured peak memory beside the memory model's estimate" in text and "ESTIMATE" in text
    md = render_markdown(out)
    assert "## Transformer memory: measured and estimated" in md and "| gpt2-tiny |" in md


def test_no_training_case_no_section(tmp_path):
    data = _stored(tmp_path, [("torch", "cpu", {"model": "gpt2-tiny", "task": "infer", "seq_len": 8}, "ok",
                               {"peak_rss_bytes": MIB})])
    assert TM.sections(data) == []
    assert TM.sections(report_data(plot_dir=tmp_path)) == []
