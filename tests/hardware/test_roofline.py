"""Roofline arithmetic, the choice of measured ceilings, the study's reference data, and the ops report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dlperf.cli.readers import peaks_runs
from dlperf.core.result import CaseResult
from dlperf.hardware.caches import DRAM
from dlperf.hardware.roofline import (
    ABOVE_TOLERANCE_REL,
    Ceilings,
    LevelCeiling,
    ceilings,
    cpu_share,
    measured_peaks,
    roofline_point,
)
from dlperf.report.ops_report import REFERENCE_CSV, reference_layout
from dlperf.store import Store
from tests.conftest import STUDIES, run_cli

KIB, MIB = 2**10, 2**20
LEVELS = (LevelCeiling("L1", 96 * KIB, 400e9, 0.02, "t"), LevelCeiling("L2", 2 * MIB, 200e9, 0.03, "t"),
          LevelCeiling("LLC", 32 * MIB, 100e9, 0.05, "t"), LevelCeiling(DRAM, None, 10e9, 0.01, "t"))
C = Ceilings(flop_peak=100e9, flop_source="t", levels=(LevelCeiling(DRAM, None, 10e9, None, "m"),), gemm_measured=80e9)
CACHED = Ceilings(flop_peak=100e9, flop_source="t", levels=LEVELS, gemm_measured=80e9, caches_known=True)


def test_memory_bound_point():
    # AI 1 FLOP/byte: the memory roof is 10 GFLOP/s, below the 100 GFLOP/s compute roof.
    r = roofline_point({"flops_per_s": 5e9, "bytes_per_s": 5e9, "arithmetic_intensity": 1.0,
                        "bytes_per_call": 1e9}, C)
    assert r["binds"] == "memory" and r["attainable_flops_per_s"] == 10e9
    assert r["pct_attainable"] == pytest.approx(50) and r["pct_flop_peak"] == pytest.approx(5)
    assert r["pct_bw_peak"] == pytest.approx(50) and r["flag"] is None


def test_compute_bound_point():
    r = roofline_point({"flops_per_s": 60e9, "bytes_per_s": 0.6e9, "arithmetic_intensity": 100.0,
                        "bytes_per_call": 12 * MIB}, C)
    assert r["binds"] == "compute" and r["attainable_flops_per_s"] == 100e9 and r["pct_attainable"] == 60


def test_missing_ceiling_gives_none_not_a_guess():
    r = roofline_point({"flops_per_s": 1e9, "bytes_per_s": 1e9, "arithmetic_intensity": 1.0, "bytes_per_call": 8.0},
                       Ceilings(None, "none", (LevelCeiling(DRAM, None, 10e9, None, "m"),), None))
    assert r["pct_flop_peak"] is None and r["binds"] is None and r["pct_bw_peak"] == 10


@pytest.mark.parametrize(("working_set", "level", "ceiling"), [
    (48 * KIB, "L1", 400e9), (96 * KIB, "L1", 400e9), (2 * MIB, "L2", 200e9), (8 * MIB, "LLC", 100e9),
    (64 * MIB, DRAM, 10e9)])
def test_each_case_is_judged_against_its_own_level(working_set, level, ceiling):
    """The torch add at 2 MiB that ran at 164 GB/s was 1322% of DRAM; in L2 it is what L2 allows."""
    m = {"flops_per_s": 164e9 / 12, "bytes_per_s": 164e9, "arithmetic_intensity": 1 / 12,
         "bytes_per_call": working_set, "iqr_rel": 0.01}
    r = roofline_point(m, CACHED)
    assert r["level"] == level and r["level_bw"] == ceiling
    assert r["pct_bw_peak"] == pytest.approx(100 * 164e9 / ceiling)
    assert r["attainable_flops_per_s"] == pytest.approx(ceiling / 12)
    tolerance = {"L1": 0.02, "L2": 0.03, "LLC": 0.05, DRAM: 0.01}[level] + 0.01 + ABOVE_TOLERANCE_REL
    assert (r["flag"] is None) == (164e9 <= ceiling * (1 + tolerance))  # the ceiling's IQR + the case's + stated


def test_above_a_ceiling_by_more_than_the_spread_is_flagged():
    base = {"arithmetic_intensity": 1 / 12, "bytes_per_call": MIB}  # L2: 200 GB/s, IQR 3%
    within = roofline_point(base | {"bytes_per_s": 229e9, "flops_per_s": 229e9 / 12, "iqr_rel": 0.02}, CACHED)
    assert within["flag"] is None and within["tolerance_pct"] == pytest.approx(5 + 100 * ABOVE_TOLERANCE_REL)
    assert within["check"] == "ok"
    above = roofline_point(base | {"bytes_per_s": 231e9, "flops_per_s": 231e9 / 12, "iqr_rel": 0.02}, CACHED)
    assert above["flag"] == "above L2 ceiling"
    # a run without cache sizes judges everything against DRAM, and says the level is not known
    legacy = roofline_point(base | {"bytes_per_s": 50e9, "flops_per_s": 50e9 / 12, "iqr_rel": 0.0}, C)
    assert legacy["level"] == "DRAM?" and legacy["flag"] == "above DRAM ceiling (no cache sizes)"


def test_above_the_compute_peak_is_a_bug_at_any_spread():
    r = roofline_point({"flops_per_s": 100.5e9, "bytes_per_s": 1e9, "arithmetic_intensity": 100.5,
                        "bytes_per_call": 64 * MIB, "iqr_rel": 0.5}, CACHED)
    assert r["pct_flop_peak"] > 100 and r["flag"] == "above compute peak"


def _peaks_run(store, env, rows, started):
    env_id = store.environment_id(env, str(sorted(env.items())))
    run_id = store.create_run(study="peaks", variant="full", study_hash="h", study_path="p", filters={},
                              settings={}, env_id=env_id, n_cases=len(rows), dlperf_version="0")
    from sqlalchemy import update

    from dlperf.store.schema import runs

    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(started_at=started, status="complete",
                                                                      finished_at=started + timedelta(minutes=1)))
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
    every = [(store.run_environment(r.id), store.results(r.id)) for r in store.runs_of_study("peaks")]
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
    assert c.flop_peak == 300e9 and c.bw_peak == 25e9 and "measured" in c.dram.source and c.gemm_measured == 100e9


def _stored_ceilings(dram_bw: float) -> dict:
    """What runner.ceilings stores with a run (one device, three cache levels and DRAM)."""
    def level(name, cap, bw, ws):
        return {"name": name, "capacity_bytes": cap, "working_set_bytes": ws, "bytes_per_s": bw,
                "bytes_per_s_median": bw * 0.95, "iqr_rel": 0.02, "kernel": "copy", "framework": "numpy",
                "figures": []}
    caches = {"source": "sysfs (test)", "levels": [
        {"level": 1, "type": "Data", "size_bytes": 48 * KIB, "instances": 2, "cpus_per_instance": 1},
        {"level": 2, "type": "Unified", "size_bytes": MIB, "instances": 2, "cpus_per_instance": 1},
        {"level": 3, "type": "Unified", "size_bytes": 32 * MIB, "instances": 1, "cpus_per_instance": 2}]}
    return {"version": 1, "threads": 2, "devices": {"cpu": {
        "device": "cpu", "threads": 2, "caches": caches, "errors": {},
        "levels": [level("L1", 96 * KIB, 300e9, 32 * KIB), level("L2", 2 * MIB, 200e9, MIB),
                   level("LLC", 32 * MIB, 150e9, 16 * MIB), level(DRAM, None, dram_bw, 128 * MIB)],
        "gemm": {"flops_per_s": 190e9, "framework": "torch", "n": 512, "iqr_rel": 0.01}}}}


def _ops_run(store, env, started, derived=None):
    """An ops run with two add cases: 1 MiB (L2) at 150 GB/s and 64 MiB (DRAM) at 30 GB/s."""
    from sqlalchemy import update

    from dlperf.store.schema import runs

    env_id = store.environment_id(env, str(sorted(env.items())))
    run_id = store.create_run(study="ops", variant="quick", study_hash="h", study_path="p", filters={},
                              settings={}, env_id=env_id, n_cases=2, dlperf_version="0", derived=derived)
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(started_at=started))
    for size_mb, bw in ((1, 150e9), (64, 30e9)):
        now = datetime.now(UTC)
        store.add_result(CaseResult.from_row({
            "run_id": run_id, "case_key": f"add/{size_mb}", "repetition": 0, "workload": "ops", "framework": "numpy",
            "device": "cpu", "params": {"op": "add", "size_mb": size_mb, "dtype": "float32"}, "status": "ok",
            "reason": None, "measurement": None, "env_id": env_id, "wall_s": 1.0, "started_at": now,
            "finished_at": now, "metrics": {"flops_per_s": bw / 12, "bytes_per_s": bw, "arithmetic_intensity": 1 / 12,
                                            "bytes_per_call": size_mb * MIB, "iqr_rel": 0.01}}))
    return run_id


HOST = {"cpu_model": "X", "hostname_sha256": "h", "threads": 2, "cpu_physical_cores": 2, "gpus": [],
        "cpu_peaks_theoretical": {"fp32_flops_per_s": 300e9, "mem_bw_bytes_per_s": None}}


def _roofline(store, run_id, tmp_path):
    from dlperf.cli.readers import report_data
    from dlperf.report.ops_report import ceiling_lines, ops_points, roofline_rows

    points = ops_points(report_data(store, run_id, tmp_path / "plots"))
    return roofline_rows(points), ceiling_lines(points)


def test_a_run_is_judged_by_its_own_ceilings_whatever_is_stored_later(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    run_id = _ops_run(store, HOST, datetime(2026, 1, 2, tzinfo=UTC), derived={"ceilings": _stored_ceilings(40e9)})
    (header, rows), lines = _roofline(store, run_id, tmp_path)
    by_mb = {r[3]: dict(zip(header, r, strict=True)) for r in rows}
    assert by_mb["1"]["level"] == "L2" and by_mb["1"]["% BW ceiling"] == "75.00" and by_mb["1"]["check"] == "ok"
    assert by_mb["64"]["level"] == DRAM and by_mb["64"]["% BW ceiling"] == "75.00" and by_mb["64"]["dtype"] == "float32"
    assert lines[0].startswith("cpu: measured at the start of this run")
    assert any(line.strip().startswith("L2 (holds 2 MiB") and "200.0 GB/s (numpy copy at 1 MiB" in line
               for line in lines)
    # a later peaks run of the same host, even a much faster one, changes nothing
    _peaks_run(store, HOST, [("numpy", "copy", 999e9), ("numpy", "gemm", 999e9)], datetime(2026, 1, 3, tzinfo=UTC))
    assert _roofline(store, run_id, tmp_path) == ((header, rows), lines)


def test_a_run_without_ceilings_uses_only_peaks_runs_finished_before_it(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    before = _peaks_run(store, HOST, [("numpy", "copy", 20e9)], datetime(2026, 1, 1, tzinfo=UTC))
    run_id = _ops_run(store, HOST, datetime(2026, 1, 2, tzinfo=UTC))
    first = _roofline(store, run_id, tmp_path)
    (header, rows), lines = first
    assert any(f"from peaks run {before} (same host, finished before this run began)" in line for line in lines)
    assert {r[header.index("level")] for r in rows} == {"DRAM?"}
    assert {r[header.index("check")] for r in rows} == {"above DRAM ceiling (no cache sizes)"}  # 150 and 30 > 20
    _peaks_run(store, HOST, [("numpy", "copy", 500e9)], datetime(2026, 1, 3, tzinfo=UTC))
    assert _roofline(store, run_id, tmp_path) == first
    # with no peaks run before it, the report says so and draws no memory ceiling
    alone = _ops_run(store, dict(HOST, hostname_sha256="other"), datetime(2026, 1, 4, tzinfo=UTC))
    (_, rows), lines = _roofline(store, alone, tmp_path)
    assert "no peaks run of this host finished before this run began" in lines[0]
    assert all(r[-1] == "ok" and r[header.index("% BW ceiling")] == "-" for r in rows)


def test_reference_data_transcribed_from_the_study():
    lines = [line for line in REFERENCE_CSV.read_text().splitlines() if not line.startswith("#")]
    assert len(lines) == 1 + 5 * 3 * 3 + 10 * 3 * 3
    assert "2,dot,65,GTX980,3869462.63,86.94" in lines  # Table 2, last row
    assert "3,sigmoid,2,GT710M,18031.07,11.35" in lines  # Table 3, first row
    header, rows = reference_layout(("add", "mul", "dot"))
    assert header[:5] == ["MB", "GPU (study 002)", "dtype", "add MFlop/s", "add Efic.%"]
    assert rows[0][:3] == ["6", "GT710M", "float32"] and rows[0][7] == "133,021.16"  # dot's 5 MB: the 6 MB row


def test_ops_run_measures_and_stores_its_ceilings_and_its_report_never_changes(tmp_path):
    """End to end: a tiny ops run measures every level's ceiling at its start and stores them with the run;
    its report judges each case against its own level and is the same after a later peaks run."""
    db = tmp_path / "r.sqlite"
    ops_study = tmp_path / "ops_tiny.yaml"
    tiny = (STUDIES / "ops_tiny.yaml").read_text()
    assert "size_mb: [1, 4]" in tiny
    # one size, and each op on one framework (numpy add, torch dot): 2 cases, yet the run's ceilings are still
    # measured on both frameworks, and the report still has a memory-bound op and a compute-bound one
    ops_study.write_text(tiny.replace("size_mb: [1, 4]", "size_mb: [1]")
                         + "exclude:\n  - {framework: numpy, op: dot}\n  - {framework: torch, op: add}\n")
    ran = run_cli("run", str(ops_study), db=db, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    # the run itself shows FLOP/s, bytes/s, the level and both efficiencies per case, and writes the plot
    assert "% FLOP peak" in ran.stdout and "% BW ceiling" in ran.stdout and "Table 2 layout" in ran.stdout
    # and no case sits above the compute peak, the machine's stored best of several probes (issue 28: a peak probed
    # once, in a dip, put a GEMM at 156% of it). The memory ceilings are measured with the run, in about 2 s, and a
    # dip from outside this VM in those seconds lowers them (the run then says so only where it saw other processes):
    # not asserted here, where another test process may stream through the same cache
    flagged = [line for line in ran.stdout.splitlines() if line.startswith("│") and "above compute peak" in line]
    assert not flagged, "\n".join(flagged)
    run_id = Store(db).resolve_run("latest")
    assert sorted((r.framework, r.params["op"]) for r in Store(db).results(run_id)) == [("numpy", "add"),
                                                                                      ("torch", "dot")]
    assert list((tmp_path / "reports" / run_id).glob(f"roofline-{run_id}.png"))
    stored = Store(db).run(run_id).derived["ceilings"]
    during = stored["activity"]["windows"]["during"]
    assert during["wall_s"] > 0 and during["others_cores"] >= 0 and "steal_frac" in during  # the machine meanwhile
    cpu = stored["devices"]["cpu"]
    assert stored["version"] == 2
    points = cpu["curve"]["points"]
    sizes = [p["working_set_bytes"] for p in points]
    assert sizes == sorted(sizes) and len(sizes) >= 8  # a sweep, not one size per level
    llc = cpu["caches"]["levels"][-1]
    assert sizes[0] <= 32 * KIB and sizes[-1] >= 2 * llc["size_bytes"]  # from inside L1 to well past the LLC
    for p in points:  # every point's best figure, with its kernel, framework, working set and spread
        assert p["bytes_per_s"] > 0 and p["kernel"] in ("copy", "add", "triad"), p
        assert p["framework"] in ("numpy", "torch") and p["spread_rel"] >= 0 and p["figures"]
        assert p["bytes_per_s"] == max(f["bytes_per_s"] for f in p["figures"])
    assert {f["framework"] for p in points for f in p["figures"]} == {"numpy", "torch"}  # the run's frameworks
    for lv in cpu["levels"]:  # the plateaus found, each with where it starts and ends
        assert lv["start_bytes"] <= lv["end_bytes"] and lv["bytes_per_s"] > 0 and lv["n_points"] >= 1
    assert cpu["gemm"]["flops_per_s"] > 0 and cpu["errors"] == {}
    plots = tmp_path / "plots"
    res = run_cli("report", run_id, "--plot-dir", str(plots), db=db)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Table 2 layout, this machine" in out and "Table 2 as published" in out
    assert "add Efic.%" in out and "binds" in out and "memory" in out
    assert "cpu: measured at the start of this run" in out and "DLPERF_* overrides act when a run starts" in out
    for name in (f"roofline-{run_id}.png", f"roofline-{run_id}.svg", f"bandwidth-curve-{run_id}.png",
                 f"bandwidth-curve-{run_id}.svg"):
        assert (plots / name).stat().st_size > 10_000
    md_path = tmp_path / "report.md"
    md = run_cli("report", run_id, "--format", "markdown", "-o", str(md_path), "--plot-dir", str(plots), db=db)
    assert md.returncode == 0, md.stderr
    text = md_path.read_text()
    assert f"![roofline](plots/roofline-{run_id}.png)" in text and "### Table 2: as published" in text
    assert f"(plots/bandwidth-curve-{run_id}.png)" in text  # the curve with the cases on it
    assert Path(plots / f"roofline-{run_id}.svg").read_text().lstrip().startswith("<?xml")
    # a peaks run measured afterwards changes nothing in this run's report
    assert run_cli("run", str(STUDIES / "peaks_tiny.yaml"), db=db).returncode == 0
    again = run_cli("report", run_id, "--plot-dir", str(plots), db=db)
    assert again.returncode == 0 and again.stdout == out


def test_a_case_too_noisy_to_judge_is_not_called_ok():
    from dlperf.report.ops_report import _check

    base = {"arithmetic_intensity": 1 / 12, "bytes_per_call": MIB, "bytes_per_s": 100e9, "flops_per_s": 100e9 / 12}
    assert _check(roofline_point(base | {"iqr_rel": 0.05}, CACHED)) == "ok"
    # the L2 ceiling's 3% + the case's 200% + the stated tolerance
    assert _check(roofline_point(base | {"iqr_rel": 2.0}, CACHED)) == (
        f"spread {3 + 200 + 100 * ABOVE_TOLERANCE_REL:.0f}%: not judged")


def _stored(levels: list[tuple[str, float | None]]) -> dict:
    return {"devices": {"cpu": {"threads": 1, "caches": {"source": "test", "levels": [1]}, "levels": [
        {"name": n, "capacity_bytes": 2**20 * (i + 1) if n != DRAM else None, "bytes_per_s": bw, "iqr_rel": 0.01,
         "framework": "numpy", "kernel": "copy", "working_set_bytes": 2**19} for i, (n, bw) in enumerate(levels)]}}}


def test_the_cpu_compute_peak_is_that_of_the_cores_the_run_uses():
    env = {"cpu_peaks_theoretical": {"fp32_flops_per_s": 500e9}, "cpu_physical_cores": 2, "threads": 1}
    c = ceilings(env, "cpu", "float32", {}, None)
    assert c.flop_peak == pytest.approx(250e9) and "1 of 2 cores" in c.flop_source
    assert ceilings(env | {"threads": 2}, "cpu", "float32", {}, None).flop_peak == pytest.approx(500e9)


def test_ceilings_measured_on_a_busy_machine_judge_no_case_against_memory():
    """Other processes used 0.8 cores while the run's ceilings were measured (the activity stored with them, judged
    as a case's): they sit below what the machine does, so a case above them is "not judged", said in the check and
    in the ceilings' origin; the compute peak (the machine's stored probe) still flags. Quiet: judged as before."""
    def stored(others: float) -> dict:
        return {"version": 2, "threads": 1, "devices": {"cpu": {"threads": 1, "caches": {"source": "t", "levels": []},
                "levels": [{"name": DRAM, "capacity_bytes": None, "bytes_per_s": 20e9, "iqr_rel": 0.01,
                            "framework": "numpy", "kernel": "copy", "working_set_bytes": 2**26}]}},
                "activity": {"cores": 2, "windows": {"during": {"wall_s": 2.0, "others_cores": others,
                                                                "own_cores": 1.0, "steal_frac": 0.0}}}}

    env = {"cpu_peaks_theoretical": {"fp32_flops_per_s": 200e9}, "cpu_physical_cores": 2, "threads": 1}
    case = {"bytes_per_call": 2**27, "bytes_per_s": 40e9, "flops_per_s": 3e9, "arithmetic_intensity": 0.08,
            "iqr_rel": 0.01, "validity": "valid"}
    busy = ceilings(env, "cpu", "float32", {}, None, stored(0.8))
    assert busy.busy == "other processes used 0.80 cores while it ran" and "on a busy machine (" in busy.origin
    point = roofline_point(case, busy)
    assert point["flag"] is None and point["check"].startswith("ceilings measured on a busy machine (other processes")
    assert roofline_point(case | {"flops_per_s": 150e9}, busy)["flag"] == "above compute peak"  # 150 of 100
    quiet = ceilings(env, "cpu", "float32", {}, None, stored(0.0))
    assert quiet.busy is None and roofline_point(case, quiet)["flag"].startswith("above DRAM ceiling")


def test_a_core_that_turbos_alone_counts_at_its_own_rate():
    """A CPU whose one core alone ran the probe's FMA loop 1.25x faster than each of its 4 busy ones (turbo on bare
    metal): 1 thread's share is 1.25 / 4 of the all-core peak, not 1 / 4, which a single-threaded GEMM would pass
    and be flagged "above compute peak"; 2 threads' is an upper bound at that rate; 4 threads get the whole peak
    and never more. On a VM (1.01x: noise) the share counts the 1% too, an upper bound still, without the note."""
    turbo = {"cpu_peaks_theoretical": {"fp32_flops_per_s": 400e9, "one_core_fma_speedup": 1.25},
             "cpu_physical_cores": 4}
    one = ceilings(turbo | {"threads": 1}, "cpu", "float32", {}, None)
    assert one.flop_peak == pytest.approx(125e9) and "1.25x the all-core rate" in one.flop_source
    assert ceilings(turbo | {"threads": 2}, "cpu", "float32", {}, None).flop_peak == pytest.approx(250e9)
    assert ceilings(turbo | {"threads": 4}, "cpu", "float32", {}, None).flop_peak == pytest.approx(400e9)
    assert cpu_share(400e9, turbo, "cpu", 3)[0] == pytest.approx(375e9)
    faster = turbo | {"cpu_peaks_theoretical": {"fp32_flops_per_s": 400e9, "one_core_fma_speedup": 1.5}}
    assert cpu_share(400e9, faster, "cpu", 3)[0] == pytest.approx(400e9)  # 3 x 1.5 / 4 of it: capped at the whole
    vm = {"cpu_peaks_theoretical": {"fp32_flops_per_s": 400e9, "one_core_fma_speedup": 1.01},
          "cpu_physical_cores": 4, "threads": 1}
    plain = ceilings(vm, "cpu", "float32", {}, None)  # still the upper bound (101e9), without the note
    assert plain.flop_peak == pytest.approx(101e9) and "all-core rate" not in plain.flop_source
    slower = vm | {"cpu_peaks_theoretical": {"fp32_flops_per_s": 400e9, "one_core_fma_speedup": 0.97}}
    assert ceilings(slower, "cpu", "float32", {}, None).flop_peak == pytest.approx(100e9)  # never below the share


def test_the_compute_ceiling_says_whether_its_peak_was_measured_set_or_modelled():
    """The FMA loop's measured throughput is no theoretical figure: the ceiling's label says which it is."""
    def source(fp32_source, dtype="float32"):
        peaks = {"fp32_flops_per_s": 500e9, "bf16_flops_per_s": 900e9, "fp32_source": fp32_source}
        return ceilings({"cpu_peaks_theoretical": peaks}, "cpu", dtype, {}, None).flop_source

    assert source("measured") == "measured float32 peak (FMA loop)"
    assert source("DLPERF_CPU_PEAK_FP32_GFLOPS") == "float32 peak from DLPERF_CPU_PEAK_FP32_GFLOPS"
    assert source("nominal") == source(None) == "theoretical float32 peak"
    assert source("measured", "bfloat16") == "theoretical bfloat16 peak"  # only FP32 is measured


def test_a_level_never_has_a_lower_ceiling_than_one_further_out():
    c = ceilings({}, "cpu", "float32", {}, None, _stored([("L1", 87e9), ("L2", 216e9), ("LLC", 203e9), (DRAM, 54e9)]))
    by_name = {lv.name: lv for lv in c.levels}
    assert by_name["L1"].bytes_per_s == 216e9 and "per-call overhead" in by_name["L1"].source
    assert by_name["L2"].bytes_per_s == 216e9 and by_name["LLC"].bytes_per_s == 203e9  # each its own


def test_stored_ceilings_without_a_figure_fall_back_to_the_theoretical_bandwidth():
    env = {"gpus": [{"index": 0, "peaks_theoretical": {"fp32_flops_per_s": 60e12, "mem_bw_bytes_per_s": 3.3e12}}]}
    stored = _stored([("L2", None), (DRAM, None)])
    stored["devices"]["cuda"] = stored["devices"].pop("cpu")
    c = ceilings(env, "cuda", "float32", {}, None, stored)
    assert c.bw_peak == pytest.approx(3.3e12) and "no figure for this device" in c.origin
