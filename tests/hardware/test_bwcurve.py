"""The bandwidth curve: plateaus found in recorded curves of three machines' cache trees, and each case judged
against the curve at its own working set (a spill at half the LLC, a noisy ceiling, a contended case)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from dlperf.core.result import CaseResult
from dlperf.core.validity import validity_words
from dlperf.hardware.bwcurve import (
    PLATEAU_MAX_RANGE_REL,
    BandwidthCurve,
    CurvePoint,
    envelope,
    find_plateaus,
    sweep_sizes,
)
from dlperf.hardware.caches import DRAM, CacheInfo, CacheLevel, from_sysfs, memory_levels
from dlperf.hardware.roofline import ABOVE_TOLERANCE_REL, CEILING_NOISY_REL, ceilings, roofline_point
from dlperf.runner.ceilings import dram_bytes

KIB, MIB = 2**10, 2**20
NOW = datetime(2026, 11, 27, tzinfo=UTC)

#: Recorded sysfs cache entries of one CPU's caches, two visible CPUs: (level, type, size, shared_cpu_list).
TREES = {
    # Intel Xeon Cascade Lake VM, 2 cores: L1d 32K, L2 1M each, L3 35.75M shared
    "cascade_lake": [(1, "Data", "32K", "{cpu}"), (1, "Instruction", "32K", "{cpu}"), (2, "Unified", "1024K", "{cpu}"),
                     (3, "Unified", "36608K", "0-1")],
    # Intel Xeon Sapphire Rapids VM, 2 cores: L1d 48K, L2 2M each, L3 105M shared
    "sapphire_rapids": [(1, "Data", "48K", "{cpu}"), (1, "Instruction", "32K", "{cpu}"),
                        (2, "Unified", "2048K", "{cpu}"), (3, "Unified", "107520K", "0-1")],
    # AMD EPYC (Zen) VM, 2 cores, as this development VM's sysfs reads: L1d 48K, L2 1M each, L3 32M shared
    "amd_epyc": [(1, "Data", "48K", "{cpu}"), (1, "Instruction", "32K", "{cpu}"), (2, "Unified", "1024K", "{cpu}"),
                 (3, "Unified", "32768K", "0-1")],
}
EXPECTED_LEVELS = {  # capacity for two threads
    "cascade_lake": [("L1", 64 * KIB), ("L2", 2 * MIB), ("LLC", 36608 * KIB), (DRAM, None)],
    "sapphire_rapids": [("L1", 96 * KIB), ("L2", 4 * MIB), ("LLC", 105 * MIB), (DRAM, None)],
    "amd_epyc": [("L1", 96 * KIB), ("L2", 2 * MIB), ("LLC", 32 * MIB), (DRAM, None)],
}


def _tree(root: Path, machine: str) -> Path:
    for cpu in (0, 1):
        for i, (level, ctype, size, shared) in enumerate(TREES[machine]):
            d = root / f"cpu{cpu}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            for name, value in (("level", level), ("type", ctype), ("size", size),
                                ("shared_cpu_list", shared.format(cpu=cpu))):
                (d / name).write_text(f"{value}\n")
    return root


def _curve(rates_gbs: dict[int, float], spread: float = 0.03, noisy: tuple[int, ...] = (),
           noisy_spread: float = 0.6) -> list[CurvePoint]:
    return [CurvePoint(ws, gbs * 1e9, noisy_spread if ws in noisy else spread, "copy", "numpy")
            for ws, gbs in rates_gbs.items()]


def _recorded(machine: str, levels_gbs: list[tuple[int, float]], dram: int) -> dict[int, float]:
    """A recorded-style curve: at each size of the sweep, the rate of the first (upper end, rate) it fits."""
    return {ws: next((gbs for end, gbs in levels_gbs if ws <= end), levels_gbs[-1][1]) for ws in sweep_sizes(dram)}


#: The Cascade Lake tree as `from_sysfs` reads it (checked below).
CL_INFO = CacheInfo((CacheLevel(1, "Data", 32 * KIB, 2, 1), CacheLevel(2, "Unified", MIB, 2, 1),
                     CacheLevel(3, "Unified", 36608 * KIB, 1, 2)), "recorded")

#: Cascade Lake with the LLC shared with other tenants: from 16 MiB on (under half its 35.75 MiB) it spills.
CL_SPILL = _recorded("cascade_lake", [(64 * KIB, 180.0), (2 * MIB, 120.0), (8 * MIB, 75.0), (16 * MIB, 42.0),
                                      (10**12, 38.0)], 4 * 36608 * KIB)


@pytest.mark.parametrize("machine", sorted(TREES))
def test_recorded_cache_trees_give_levels_and_a_sweep_from_inside_l1_to_past_the_llc(tmp_path, machine):
    info = from_sysfs(_tree(tmp_path, machine), cpus=frozenset({0, 1}))
    assert info is not None
    levels = memory_levels(info, 2)
    assert levels == EXPECTED_LEVELS[machine]
    sizes = sweep_sizes(dram_bytes(info, 2))
    l1, llc = levels[0][1], levels[2][1]
    assert sizes[0] < l1 // 2 and sizes[-1] >= 4 * llc
    assert len(sizes) <= 20  # about one point per octave: the quick run stays short
    if machine == "cascade_lake":
        assert info.levels == CL_INFO.levels


def test_plateaus_come_from_the_data_not_from_half_the_reported_llc(tmp_path):
    info = from_sysfs(_tree(tmp_path, "cascade_lake"), cpus=frozenset({0, 1}))
    plateaus = find_plateaus(_curve(CL_SPILL), memory_levels(info, 2))
    by_name = {p.name: p for p in plateaus}
    assert list(by_name) == ["L1", "L2", "LLC", DRAM]
    assert by_name["L1"].bytes_per_s == pytest.approx(180e9) and by_name["L2"].bytes_per_s == pytest.approx(120e9)
    # the LLC ends where the data says (8 MiB), far under the 35.75 MiB reported; DRAM starts at 16 MiB
    assert by_name["LLC"].end_bytes == 8 * MIB and by_name["LLC"].bytes_per_s == pytest.approx(75e9)
    assert by_name[DRAM].start_bytes == 16 * MIB and by_name[DRAM].bytes_per_s < 43e9


def test_plateaus_on_the_other_machines_and_an_overhead_bound_start(tmp_path):
    for machine, ends in (("sapphire_rapids", [(96 * KIB, 250.0), (4 * MIB, 150.0), (64 * MIB, 90.0), (10**12, 30.0)]),
                          ("amd_epyc", [(64 * KIB, 90.0), (2 * MIB, 230.0), (16 * MIB, 180.0), (10**12, 50.0)])):
        info = from_sysfs(_tree(tmp_path / machine, machine), cpus=frozenset({0, 1}))
        rates = _recorded(machine, ends, dram_bytes(info, 2))
        names = [p.name for p in find_plateaus(_curve(rates), memory_levels(info, 2))]
        if machine == "amd_epyc":  # L1 below L2: per-call overhead bounds it, and its name says so
            assert names == ["L1 (overhead-bound)", "L2", "LLC", DRAM]
        else:
            assert names == ["L1", "L2", "LLC", DRAM]


def test_a_disturbed_point_is_covered_by_the_larger_sizes():
    pts = _curve({1 * MIB: 200.0, 2 * MIB: 60.0, 4 * MIB: 190.0, 8 * MIB: 50.0})
    assert [v / 1e9 for v, _ in envelope(pts)] == [200.0, 190.0, 190.0, 50.0]


def _stored(rates: dict[int, float], noisy: tuple[int, ...] = ()) -> dict:
    pts = _curve(rates, noisy=noisy)
    curve = BandwidthCurve(tuple(pts), tuple(find_plateaus(pts, memory_levels(CL_INFO, 2))))
    return {"version": 2, "devices": {"cpu": {"threads": 2, "caches": CL_INFO.to_dict(), "levels": [],
                                              "curve": curve.to_dict()}}}


def _case(ws: float, gbs: float, **extra) -> dict:
    return {"bytes_per_call": ws, "bytes_per_s": gbs * 1e9, "flops_per_s": gbs * 1e9 / 12,
            "arithmetic_intensity": 1 / 12, "iqr_rel": 0.04, **extra}


ENV = {"cpu_peaks_theoretical": {"fp32_flops_per_s": 300e9}}


def test_a_case_above_the_old_per_level_figure_but_within_the_curve_at_its_size_is_not_flagged():
    c = ceilings(ENV, "cpu", "float32", {}, None, _stored(CL_SPILL))
    assert c.curve is not None and "bandwidth curve of" in c.origin
    # torch add on 12 MB at 70 GB/s: 175% of the old LLC figure (measured at 17.9 MiB, spilled: 40 GB/s) ...
    r = roofline_point(_case(12e6, 70.0), c)
    assert r["flag"] is None and r["check"] == "ok" and r["level"] == "LLC-DRAM"  # on the slope between the two
    assert 70e9 / 75e9 < r["pct_bw_peak"] / 100 < 70e9 / 42e9  # between the points around it
    # ... while a case well above the curve at its size is flagged: the check can fail
    above = roofline_point(_case(12e6, 100.0), c)
    assert above["flag"] == "above LLC-DRAM ceiling" and above["check"] == above["flag"]
    at_point = roofline_point(_case(4 * MIB, 75.0 * (1 + 0.03 + 0.04 + ABOVE_TOLERANCE_REL) * 1.02), c)
    assert at_point["flag"] == "above LLC ceiling"


def test_a_noisy_ceiling_cannot_flag_a_case():
    noisy = (4 * MIB, 8 * MIB)
    c = ceilings(ENV, "cpu", "float32", {}, None, _stored(CL_SPILL, noisy=noisy))
    r = roofline_point(_case(5 * MIB, 300.0), c)  # four times the curve: flagged, were the ceiling not noisy
    assert r["flag"] is None and r["ceiling_spread_pct"] > 100 * CEILING_NOISY_REL
    assert r["check"].startswith("ceiling too noisy to judge (IQR 60% at numpy copy at 8 MiB")


def test_a_contended_case_is_not_judged_in_the_words_the_run_printed(tmp_path):
    from dlperf.cli.progress import ConsoleEvents

    reason = "other processes used 1.0 cores (python pid 42: 1.0); IQR 12% of the median"
    c = ceilings(ENV, "cpu", "float32", {}, None, _stored(CL_SPILL))
    metrics = _case(2 * MIB, 160.0, validity="contended", validity_reason=reason)  # 133% of the curve
    r = roofline_point(metrics, c)
    words = validity_words("contended", reason)
    assert words == "contended: other processes used 1.0 cores"
    assert r["flag"] is None and r["check"] == f"{words}: not judged"
    noisy = roofline_point(_case(2 * MIB, 160.0, validity="noisy", validity_reason="IQR 15% of the median"), c)
    assert noisy["flag"] is None and noisy["check"] == "noisy: IQR 15% of the median: not judged"
    # the progress line prints the same words
    console = Console(record=True, width=300)
    row = CaseResult.from_row({
        "run_id": "r", "case_key": "ops/torch/cpu/add", "repetition": 0, "workload": "ops", "framework": "torch",
        "device": "cpu", "params": {"op": "add"}, "status": "ok", "reason": None, "measurement": None,
        "metrics": metrics | {"median_s": 1e-4, "n_samples": 50}, "env_id": 1, "wall_s": 1.0,
        "started_at": NOW, "finished_at": NOW})
    ConsoleEvents(console).case_done(1, 1, row)
    assert f" - {words}" in console.export_text()


def test_a_run_stored_before_curves_still_reports_with_one_figure_per_level():
    stored = {"devices": {"cpu": {"threads": 2, "caches": CL_INFO.to_dict(), "levels": [
        {"name": "L2", "capacity_bytes": 2 * MIB, "working_set_bytes": MIB, "bytes_per_s": 200e9, "iqr_rel": 0.02,
         "framework": "numpy", "kernel": "copy"},
        {"name": DRAM, "capacity_bytes": None, "working_set_bytes": 64 * MIB, "bytes_per_s": 40e9, "iqr_rel": 0.02,
         "framework": "numpy", "kernel": "copy"}]}}}
    c = ceilings(ENV, "cpu", "float32", {}, None, stored)
    assert c.curve is None and "stored before bandwidth curves" in c.origin
    assert roofline_point(_case(MIB, 150.0), c)["pct_bw_peak"] == pytest.approx(75)
    assert roofline_point(_case(64 * MIB, 60.0), c)["flag"] == "above DRAM ceiling"


#: Recorded: the curve a quick run measured on this AMD EPYC VM (1 thread, other processes using 1.5 cores):
#: (working set, GB/s, IQR/median). Noisy: a dip at 2.67 MiB, spreads up to 300%.
EPYC_BUSY = [(16380, 43.2, 1.081), (32760, 71.1, 1.591), (43688, 103.1, 1.964), (87376, 140.9, 0.469),
             (174760, 171.4, 0.062), (524280, 208.0, 0.169), (699048, 214.4, 3.026), (1398096, 159.2, 2.984),
             (2796200, 110.3, 1.038), (8388600, 123.0, 0.146), (11184808, 129.1, 0.203), (22369616, 90.3, 0.203),
             (44739240, 47.1, 2.558), (89478480, 41.0, 0.261)]
EPYC_INFO = CacheInfo((CacheLevel(1, "Data", 48 * KIB, 2, 1), CacheLevel(2, "Unified", MIB, 2, 1),
                       CacheLevel(3, "Unified", 32 * MIB, 1, 2)), "recorded")


def test_a_recorded_noisy_curve_invents_no_level_and_judges_only_where_its_ceiling_is_steady():
    pts = [CurvePoint(ws, gbs * 1e9, spread, "copy", "numpy") for ws, gbs, spread in EPYC_BUSY]
    plateaus = find_plateaus(pts, memory_levels(EPYC_INFO, 1))
    for p in plateaus:  # each plateau is level in the data: its points within the stated range
        inside = [q.bytes_per_s for q in pts if p.start_bytes <= q.working_set_bytes <= p.end_bytes]
        assert len(inside) == p.n_points and max(inside) / min(inside) - 1 <= PLATEAU_MAX_RANGE_REL
    assert not any(p.start_bytes <= 2796200 <= p.end_bytes for p in plateaus)  # the dip sits in no plateau
    curve = BandwidthCurve(tuple(pts), tuple(plateaus))
    stored = {"devices": {"cpu": {"threads": 1, "caches": EPYC_INFO.to_dict(), "levels": [],
                                  "curve": curve.to_dict()}}}
    c = ceilings(ENV, "cpu", "float32", {}, None, stored)
    # the dip at 2.67 MiB is covered by the larger sizes: a case at 6 MB is judged against 129 GB/s (IQR 20%)
    at = curve.at(6e6)
    assert at is not None and at.upper_bytes_per_s == pytest.approx(129.1e9) and "10.7 MiB" in at.source
    assert roofline_point(_case(6e6, 120.0), c)["check"] == "ok"
    assert roofline_point(_case(6e6, 240.0), c)["flag"] is not None  # far above: flagged
    # at 48 MB the ceiling is set by a point whose IQR is 256%: it cannot flag even a case twice its figure
    r = roofline_point(_case(48e6, 95.0), c)
    assert r["flag"] is None and r["check"].startswith("ceiling too noisy to judge (IQR 256%")
