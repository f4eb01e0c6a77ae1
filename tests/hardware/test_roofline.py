"""Roofline arithmetic, the choice of measured ceilings, the study's reference data, and the ops report."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dlperf.cli.readers import peaks_runs
from dlperf.core.result import CaseResult
from dlperf.hardware.roofline import Ceilings, ceilings, measured_peaks, roofline_point
from dlperf.report.ops_report import REFERENCE_CSV, reference_layout
from dlperf.store import Store
from tests.conftest import STUDIES, run_cli

C = Ceilings(flop_peak=100e9, flop_source="t", bw_peak=10e9, bw_source="m", gemm_measured=80e9)


def test_memory_bound_point():
    # AI 1 FLOP/byte: the memory roof is 10 GFLOP/s, below the 100 GFLOP/s compute roof.
    r = roofline_point({"flops_per_s": 5e9, "bytes_per_s": 5e9, "arithmetic_intensity": 1.0}, C)
    assert r["binds"] == "memory" and r["attainable_flops_per_s"] == 10e9
    assert r["pct_attainable"] == pytest.approx(50) and r["pct_flop_peak"] == pytest.approx(5)
    assert r["pct_bw_peak"] == pytest.approx(50)


def test_compute_bound_point():
    r = roofline_point({"flops_per_s": 60e9, "bytes_per_s": 0.6e9, "arithmetic_intensity": 100.0}, C)
    assert r["binds"] == "compute" and r["attainable_flops_per_s"] == 100e9 and r["pct_attainable"] == 60


def test_missing_ceiling_gives_none_not_a_guess():
    r = roofline_point({"flops_per_s": 1e9, "bytes_per_s": 1e9, "arithmetic_intensity": 1.0},
                       Ceilings(None, "none", 10e9, "m", None))
    assert r["pct_flop_peak"] is None and r["binds"] is None and r["pct_bw_peak"] == 10


def _peaks_run(store, env, rows, started):
    env_id = store.environment_id(env, str(sorted(env.items())))
    run_id = store.create_run(study="peaks", variant="full", study_hash="h", study_path="p", filters={},
                              settings={}, env_id=env_id, n_cases=len(rows), dlperf_version="0")
    from sqlalchemy import update

    from dlperf.store.schema import runs

    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(started_at=started))
    for i, (fw, kind, value) in enumerate(rows):
        key = "flops_per_s" if kind == "gemm" else "bytes_per_s"
        now = datetime.now(UTC)
        store.add_result(CaseResult.from_row({
            "run_id": run_id, "case_key": f"{fw}/{kind}/{i}", "repetition": 0, "workload": "peaks", "framework": fw,
            "device": "cpu", "params": {"kind": kind}, "status": "ok", "reason": None, "measurement": None,
            "metrics": {key: value}, "env_id": env_id, "wall_s": 1.0, "started_at": now, "finished_at": now}))
    return run_id


def test_measured_peaks_newest_per_framework_best_per_device(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    host = {"cpu_model": "X", "hostname_sha256": "h", "threads": 2, "cpu_physical_cores": 2, "gpus": []}
    other = dict(host, hostname_sha256="other")
    _peaks_run(store, host, [("numpy", "copy", 20e9), ("torch", "copy", 30e9)], datetime(2026, 1, 1, tzinfo=UTC))
    _peaks_run(store, host, [("torch", "copy", 25e9), ("torch", "gemm", 100e9)], datetime(2026, 1, 2, tzinfo=UTC))
    _peaks_run(store, other, [("torch", "copy", 999e9)], datetime(2026, 1, 3, tzinfo=UTC))
    every = [(store.run_environment(r["id"]), store.results(r["id"])) for r in store.runs_of_study("peaks")]
    best, used = measured_peaks(every, host)
    # torch's newest copy (25) replaces its older 30; numpy's 20 stays; best of the two = 25.
    assert best == {"cpu": {"copy": 25e9, "gemm": 100e9}}
    assert used.count("peaks-") == 2  # the other host's run is not used
    # the store read behind the ops report passes only this host's runs, newest first: the same figures
    mine = peaks_runs(store, [host])
    assert len(mine) == 2 and measured_peaks(mine, host) == (best, used)
    assert measured_peaks([], host) == ({}, None)
    c = ceilings({"cpu_peaks_theoretical": {"fp32_flops_per_s": 300e9, "mem_bw_bytes_per_s": None}}, "cpu",
                 "float32", best, used)
    assert c.flop_peak == 300e9 and c.bw_peak == 25e9 and "measured" in c.bw_source and c.gemm_measured == 100e9


def test_reference_data_transcribed_from_the_study():
    lines = [line for line in REFERENCE_CSV.read_text().splitlines() if not line.startswith("#")]
    assert len(lines) == 1 + 5 * 3 * 3 + 10 * 3 * 3
    assert "2,dot,65,GTX980,3869462.63,86.94" in lines  # Table 2, last row
    assert "3,sigmoid,2,GT710M,18031.07,11.35" in lines  # Table 3, first row
    header, rows = reference_layout(("add", "mul", "dot"))
    assert header[:5] == ["MB", "GPU (study 002)", "dtype", "add MFlop/s", "add Efic.%"]
    assert rows[0][:3] == ["6", "GT710M", "float32"] and rows[0][7] == "133,021.16"  # dot's 5 MB: the 6 MB row


def test_ops_report_writes_study_layout_and_roofline(tmp_path):
    db = tmp_path / "r.sqlite"
    ops_study = tmp_path / "ops_tiny.yaml"
    ops_study.write_text((STUDIES / "ops_tiny.yaml").read_text())
    assert run_cli("run", str(STUDIES / "peaks_tiny.yaml"), db=db).returncode == 0
    ran = run_cli("run", str(ops_study), db=db, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    # the run itself shows FLOP/s, bytes/s and both efficiencies per case, and writes the plot
    assert "% FLOP peak" in ran.stdout and "% BW peak" in ran.stdout and "Table 2 layout" in ran.stdout
    assert list((tmp_path / "reports").glob("ops_tiny-*/roofline.png"))
    plots = tmp_path / "plots"
    res = run_cli("report", "ops_tiny", "--plot-dir", str(plots), db=db)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Table 2 layout, this machine" in out and "Table 2 as published" in out
    assert "add Efic.%" in out and "binds" in out and "memory" in out
    assert "measured copy/triad bandwidth" in out
    for name in ("roofline.png", "roofline.svg"):
        assert (plots / name).stat().st_size > 10_000
    md_path = tmp_path / "report.md"
    md = run_cli("report", "ops_tiny", "--format", "markdown", "-o", str(md_path), "--plot-dir", str(plots), db=db)
    assert md.returncode == 0, md.stderr
    text = md_path.read_text()
    assert "![roofline](plots/roofline.png)" in text and "### Table 2: as published" in text
    assert Path(plots / "roofline.svg").read_text().lstrip().startswith("<?xml")
