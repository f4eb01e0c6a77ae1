"""The hardware catalog (study 004): complete and sourced entries with consistent units, study 004's
figures set against it, lookup and detection, and the `dlperf hw` commands."""

from __future__ import annotations

import pytest

from dlperf.hardware.catalog import FIGURES, catalog, diff_study, find, match, study004
from dlperf.hardware.detect import detect_cpu
from tests.conftest import run_cli

STUDY_DEVICES = ["gtx-1070", "rx-580", "hd-graphics-4400", "ncs2", "jetson-nano", "jetson-tx2", "gtx-titan-x-maxwell",
                 "tesla-k40", "gtx-980", "gt-710m", "xeon-e5620"]
CURRENT = ["h100-sxm", "h100-pcie", "h200", "a100-sxm-80gb", "l4", "t4", "rtx-4090", "rtx-3060", "jetson-orin-nano",
           "jetson-agx-orin", "mi300x", "xeon-8480plus", "epyc-9654", "tpu-v4", "tpu-v5e"]

#: Plausible bounds per figure, in the catalog's units: a figure outside them is a unit slip.
BOUNDS = {"process_nm": (3, 65), "transistors_millions": (100, 200_000), "memory_gb": (0.1, 256),
          "memory_bw_gbs": (5, 10_000), "peak_fp32_tflops": (0.01, 200), "peak_fp16_tflops": (0.05, 2_000),
          "peak_int8_tops": (1, 4_000), "peak_clock_mhz": (300, 5_000), "tdp_w": (1, 1_000),
          "launch_year": (2008, 2026), "launch_price_usd": (30, 50_000)}


def test_at_least_30_devices_with_the_studies_and_current_ones():
    ids = {d.id for d in catalog()}
    assert len(ids) >= 30
    assert set(STUDY_DEVICES + CURRENT) <= ids
    assert {e.id for e in study004()} <= ids
    assert {d.kind for d in catalog()} == {"cpu", "gpu", "soc", "accelerator"}


@pytest.mark.parametrize("device", catalog(), ids=lambda d: d.id)
def test_every_figure_present_sourced_and_in_range(device):
    for field in FIGURES:
        value = getattr(device, field)  # required by the schema: a number or the explicit "unknown"
        assert value == "unknown" or isinstance(value, float | int)
        assert device.source(field).startswith("https://"), field
        if value != "unknown":
            lo, hi = BOUNDS[field]
            assert lo <= value <= hi, f"{device.id}.{field} = {value} outside [{lo}, {hi}]"
    for field in device.derived:
        assert getattr(device, field) != "unknown"
    if device.kind == "gpu" and device.value("peak_fp32_tflops") and device.value("memory_bw_gbs"):
        # GPUs of this catalogue sit at 5-150 FLOPs per byte of DRAM bandwidth (FP32): a slip of 1000x would not
        assert 5 < device.value("peak_fp32_tflops") * 1e3 / device.value("memory_bw_gbs") < 150, device.id


def test_rx580_figures_of_study_004_disagree_with_amd():
    rows = {(r["device"], r["figure"]): r for r in diff_study()}
    for figure in ("peak fp32 GFLOP/s", "tdp_w", "process_nm"):
        assert rows[("rx-580", figure)]["verdict"] == "disagree"
    assert rows[("gtx-1070", "process_nm")]["verdict"] == "agree"
    assert rows[("ncs2", "tdp_w")]["verdict"].startswith("cannot check")


def test_lookup_and_matching():
    assert find("RX 580").id == find("rx580").id == "rx-580"
    assert find("geforce gtx 1070").id == "gtx-1070"
    with pytest.raises(KeyError, match="h100-sxm"):
        find("H100")
    assert match("NVIDIA H100 80GB HBM3").id == "h100-sxm"
    assert match("NVIDIA H100 PCIe").id == "h100-pcie"
    assert match("Intel(R) Xeon(R) CPU           E5620  @ 2.40GHz").id == "xeon-e5620"
    assert match("AMD EPYC 7B13") is None


def test_datasheet_efficiency():
    d = find("rtx-4090")
    assert d.efficiency()["gflops_per_w"] == pytest.approx(82.6e3 / 450)
    assert d.efficiency()["gflops_per_usd"] == pytest.approx(82.6e3 / 1599)
    assert find("h100-sxm").efficiency()["gflops_per_usd"] is None  # no list price: no ratio


def test_this_machine_is_detected():
    dev, how = detect_cpu()
    assert dev.kind == "cpu" and dev.name
    if dev.detected:
        assert "derived" in how and dev.source("peak_fp32_tflops").startswith("derived on this machine")


def test_hw_commands(tmp_path):
    res = run_cli("hw", "list", "--kind", "gpu", "--sort", "peak_fp32_tflops", "--desc")
    assert res.returncode == 0, res.stderr
    body = [ln for ln in res.stdout.splitlines() if ln.startswith("│")]
    assert "mi300x" in body[0] and all("gpu" in ln for ln in body)
    res = run_cli("hw", "show")
    assert res.returncode == 0, res.stderr
    assert detect_cpu()[0].name in res.stdout and "peak_fp32_tflops" in res.stdout
    res = run_cli("hw", "show", "jetson-nano")
    assert "developer.nvidia.com/embedded/jetson-nano" in res.stdout
    res = run_cli("hw", "compare", "rx-580", "gtx-1070")
    assert res.returncode == 0 and "GFLOP/s per W" in res.stdout
    res = run_cli("hw", "diff-study")
    assert res.returncode == 0 and "rx-580" in res.stdout and "disagree" in res.stdout
    res = run_cli("hw", "show", "no-such-gpu")
    assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1 and "hw list" in res.stderr


def test_ops_peaks_read_from_the_catalog():
    """A GPU the catalog knows takes the vendor's figures (the derived ones kept beside them); a CPU takes
    its package figure scaled to the cores it sees; a device not in the catalog keeps the derived peak."""
    from dlperf.hardware.catalog_peaks import catalog_peaks

    derived = {"fp32_flops_per_s": 60e12, "fp16_flops_per_s": 900e12, "bf16_flops_per_s": 900e12,
               "mem_bw_bytes_per_s": 3.0e12, "assumptions": "SMs x clock"}
    h100 = find("h100-sxm")
    gpu = catalog_peaks(derived, "NVIDIA H100 80GB HBM3", kind="gpu")
    assert gpu["catalog_id"] == "h100-sxm"
    assert gpu["fp32_flops_per_s"] == h100.value("peak_fp32_tflops") * 1e12
    assert gpu["bf16_flops_per_s"] == gpu["fp16_flops_per_s"] == h100.value("peak_fp16_tflops") * 1e12
    assert gpu["mem_bw_bytes_per_s"] == h100.value("memory_bw_gbs") * 1e9
    assert gpu["derived_fp32_flops_per_s"] == 60e12 and "catalog entry h100-sxm" in gpu["peaks_source"]

    epyc = find("epyc-9654")
    cpu = catalog_peaks({"fp32_flops_per_s": 1e11, "mem_bw_bytes_per_s": None}, "AMD EPYC 9654 96-Core Processor",
                        kind="cpu", visible_cores=2)
    assert cpu["fp32_flops_per_s"] == pytest.approx(epyc.value("peak_fp32_tflops") * 1e12 * 2 / 96)
    assert cpu["mem_bw_bytes_per_s"] is None  # a 2-core slice has no share of the package bandwidth to claim
    whole = catalog_peaks({"fp32_flops_per_s": 1e11}, "AMD EPYC 9654", kind="cpu", visible_cores=96)
    assert whole["mem_bw_bytes_per_s"] == epyc.value("memory_bw_gbs") * 1e9

    no_fp32 = catalog_peaks({"fp32_flops_per_s": 5e12}, "Intel(R) Xeon(R) Platinum 8480+", kind="cpu",
                            visible_cores=56)
    assert no_fp32["catalog_id"] == "xeon-8480plus"  # cpuinfo's "(R)" marks do not hide the match
    assert no_fp32["fp32_flops_per_s"] == 5e12  # Intel publishes none: the derived figure stands
    unknown = catalog_peaks({"fp32_flops_per_s": 3e11}, "AMD EPYC", kind="cpu", visible_cores=2)
    assert unknown["fp32_flops_per_s"] == 3e11 and "no catalog entry" in unknown["peaks_source"]
    assert "catalog_id" not in catalog_peaks(derived, "Intel Xeon E5620", kind="gpu")  # a CPU name is no GPU


def test_hardware_imports_point_down_only():
    """No module of hardware/ imports store, report, runner or cli (at module level or inside a function),
    and each imports only hardware modules listed before it in hardware/__init__ (so no circle)."""
    import ast
    from pathlib import Path

    import dlperf.hardware

    order = ["cpu_limits", "probe", "noise", "caches", "bwcurve", "fma_peak", "clock_probe", "peak_cache", "catalog",
             "catalog_peaks", "peaks", "identity", "detect", "roofline", "measured", "source_costs", "recommend"]
    folder = Path(dlperf.hardware.__file__).parent
    assert sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__") == sorted(order)
    for i, name in enumerate(order):
        found: set[str] = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        upward = {m for m in found if m.startswith("dlperf.") and
                  m.split(".")[1].startswith(("store", "report", "runner", "cli", "doctor"))}
        assert not upward, f"hardware/{name}.py imports {upward}"
        inside = {m.split(".")[2] for m in found if m.startswith("dlperf.hardware.") and len(m.split(".")) > 2}
        assert inside <= set(order[:i]), f"hardware/{name}.py imports {inside - set(order[:i])} (listed after it)"


def test_every_peak_states_its_clock_on_one_basis():
    """The catalog states its peaks at the vendor's rated boost clock (or says the clock is unknown); the
    entries once at base were restated (K40: 4.29 -> 5.04 TFLOPS at 875 MHz, as the GTX 980 at 1216 MHz)."""
    for d in catalog():
        assert d.peak_clock in ("boost", "unknown"), d.id
        if d.peak_clock == "unknown":
            assert d.peak_clock_mhz == "unknown", d.id
    k40, gtx980 = find("tesla-k40"), find("gtx-980")
    assert (k40.peak_clock, k40.value("peak_clock_mhz"), k40.value("peak_fp32_tflops")) == ("boost", 875, 5.04)
    assert k40.value("peak_fp32_tflops") == pytest.approx(2880 * 875e6 * 2 / 1e12, rel=1e-3)
    assert gtx980.value("peak_fp32_tflops") == pytest.approx(2048 * gtx980.value("peak_clock_mhz") * 1e6 * 2 / 1e12,
                                                             rel=1e-3)
    epyc = find("epyc-9654")  # 96 cores x 3.7 GHz max boost x 32 FLOP/cycle
    assert epyc.value("peak_fp32_tflops") == pytest.approx(96 * 3.7e9 * 32 / 1e12, rel=1e-3)
    res = run_cli("hw", "list", "--kind", "cpu")
    assert res.returncode == 0 and "at clock" in res.stdout and "boost 3,700 MHz" in res.stdout
