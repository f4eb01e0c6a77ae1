"""Theoretical peaks of this machine: FLOP/s by dtype and memory bandwidth, with their assumptions.

A theoretical peak is arithmetic on datasheet-like facts, never a measurement;
each figure carries the assumptions it rests on, and can be overridden:
- DLPERF_CPU_CLOCK_GHZ: the clock the CPU sustains under vector load (the default,
  read from cpufreq or /proc/cpuinfo, is often the base clock: turbo under AVX
  load can be higher, so measured GEMM may exceed this "peak").
- DLPERF_CPU_FMA_UNITS: vector FMA units per core (default 2, as on server
  Xeons since Skylake-SP and on AMD Zen 4/5; some parts have 1).
- DLPERF_CPU_PEAK_FP32_GFLOPS: the whole FP32 figure, replacing the model.
- DLPERF_MEM_BW_GBS: the memory bandwidth, which cannot be read inside a VM.
GPU peaks come from the device's SM count and clock and a per-architecture table.
Where the device has an entry in the hardware catalog, `catalog_peaks` replaces these derived figures
with the catalog's (sourced) ones and keeps the derived ones beside them.

Peaks are derived data: they change with the catalog and the overrides on the same machine, so they
are recorded beside a run, never part of the environment's identity (`hardware.identity`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dlperf.hardware import probe
from dlperf.hardware.catalog import match

#: The environment variables that override a derived peak (recorded with each run).
OVERRIDES = ("DLPERF_CPU_CLOCK_GHZ", "DLPERF_CPU_FMA_UNITS", "DLPERF_CPU_PEAK_FP32_GFLOPS", "DLPERF_MEM_BW_GBS")

#: FP32 lanes of one vector register, by the widest ISA present.
_VECTOR_BITS = (("avx512f", 512), ("avx2", 256), ("avx", 256), ("asimd", 128), ("neon", 128))

#: Per compute capability: FP32 lanes per SM, and dense FP16/BF16 tensor-core FLOPs per SM per clock.
#: (Volta/Turing/Ampere/Ada/Hopper whitepapers; FP16 figures are dense, without sparsity.)
GPU_ARCH: dict[tuple[int, int], dict[str, Any]] = {
    (3, 5): {"name": "Kepler", "fp32_lanes_per_sm": 192, "fp16_tc_flops_per_sm_clk": None},
    (3, 7): {"name": "Kepler", "fp32_lanes_per_sm": 192, "fp16_tc_flops_per_sm_clk": None},
    (5, 0): {"name": "Maxwell", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": None},
    (5, 2): {"name": "Maxwell", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": None},
    (5, 3): {"name": "Maxwell (Tegra X1)", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": None},
    (6, 0): {"name": "Pascal", "fp32_lanes_per_sm": 64, "fp16_tc_flops_per_sm_clk": None},
    (6, 1): {"name": "Pascal", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": None},
    (6, 2): {"name": "Pascal (Tegra X2)", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": None},
    (7, 0): {"name": "Volta", "fp32_lanes_per_sm": 64, "fp16_tc_flops_per_sm_clk": 1024},
    (7, 2): {"name": "Volta (Xavier)", "fp32_lanes_per_sm": 64, "fp16_tc_flops_per_sm_clk": 1024},
    (7, 5): {"name": "Turing", "fp32_lanes_per_sm": 64, "fp16_tc_flops_per_sm_clk": 1024},
    (8, 0): {"name": "Ampere (A100)", "fp32_lanes_per_sm": 64, "fp16_tc_flops_per_sm_clk": 2048},
    (8, 6): {"name": "Ampere", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": 512},
    (8, 7): {"name": "Ampere (Orin)", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": 512},
    (8, 9): {"name": "Ada", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": 512},
    (9, 0): {"name": "Hopper", "fp32_lanes_per_sm": 128, "fp16_tc_flops_per_sm_clk": 4096},
}


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number") from None


def cpu_clock_ghz() -> tuple[float | None, str]:
    """(clock in GHz, where it came from)."""
    override = _env_float("DLPERF_CPU_CLOCK_GHZ")
    if override:
        return override, "DLPERF_CPU_CLOCK_GHZ"
    try:
        khz = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
        return khz / 1e6, "cpufreq cpuinfo_max_freq"
    except (OSError, ValueError):
        pass
    mhz = probe.cpu_mhz()
    if mhz:
        return max(mhz) / 1e3, "/proc/cpuinfo 'cpu MHz' (often the base clock in a VM)"
    return None, "no clock readable"


def overrides_in_force() -> dict[str, str]:
    """The `OVERRIDES` set in this process's environment, as set."""
    return {name: os.environ[name] for name in OVERRIDES if os.environ.get(name)}


def cpu_theoretical(physical_cores: int, flags: list[str]) -> dict[str, Any]:
    """FP32 (and BF16 where the ISA has it) peak of the CPU, with every assumption spelled out."""
    clock, clock_source = cpu_clock_ghz()
    units = int(_env_float("DLPERF_CPU_FMA_UNITS") or 2)
    bits = next((b for flag, b in _VECTOR_BITS if flag in flags), 128)
    lanes = bits // 32
    has_fma = "fma" in flags or "avx512f" in flags or "asimd" in flags
    flops_per_lane = 2 if has_fma else 1
    override = _env_float("DLPERF_CPU_PEAK_FP32_GFLOPS")
    out: dict[str, Any] = {
        "physical_cores": physical_cores,
        "clock_ghz": clock,
        "clock_source": clock_source,
        "vector_bits": bits,
        "fma_units_per_core": units,
        "assumptions": (f"{physical_cores} cores x {clock or '?'} GHz x {units} FMA units x {lanes} FP32 lanes "
                        f"x {flops_per_lane} (FMA = 2 FLOPs); the clock under vector load may differ"),
    }
    if override:
        out["fp32_flops_per_s"] = override * 1e9
        out["assumptions"] = "DLPERF_CPU_PEAK_FP32_GFLOPS"
    elif clock:
        out["fp32_flops_per_s"] = physical_cores * clock * 1e9 * units * lanes * flops_per_lane
    else:
        out["fp32_flops_per_s"] = None
    if out["fp32_flops_per_s"] and "avx512_bf16" in flags:
        # VDPBF16PS: two BF16 products per FP32 lane per FMA slot.
        out["bf16_flops_per_s"] = 2 * out["fp32_flops_per_s"]
    if out["fp32_flops_per_s"] and "amx_bf16" in flags and clock:
        # AMX: 1024 BF16 multiply-adds per core per cycle (Sapphire Rapids).
        out["bf16_flops_per_s"] = physical_cores * clock * 1e9 * 2048
    bw = _env_float("DLPERF_MEM_BW_GBS")
    out["mem_bw_bytes_per_s"] = bw * 1e9 if bw else None
    out["mem_bw_source"] = "DLPERF_MEM_BW_GBS" if bw else (
        "unknown: DIMM speed and channels are not readable here (set DLPERF_MEM_BW_GBS); "
        "the measured copy bandwidth of `dlperf peaks` is used as the ceiling")
    return out


def gpu_theoretical(*, major: int, minor: int, sm_count: int, sm_clock_mhz: float | None,
                    mem_clock_mhz: float | None, bus_width_bits: int | None) -> dict[str, Any]:
    """A GPU's FP32/FP16 peaks and bandwidth from its properties and the architecture table."""
    arch = GPU_ARCH.get((major, minor))
    out: dict[str, Any] = {"compute_capability": f"{major}.{minor}", "sm_count": sm_count,
                           "sm_clock_mhz": sm_clock_mhz, "architecture": arch["name"] if arch else "unknown"}
    if arch and sm_clock_mhz:
        out["fp32_flops_per_s"] = sm_count * arch["fp32_lanes_per_sm"] * 2 * sm_clock_mhz * 1e6
        tc = arch["fp16_tc_flops_per_sm_clk"]
        out["fp16_flops_per_s"] = sm_count * tc * sm_clock_mhz * 1e6 if tc else None
        out["bf16_flops_per_s"] = out["fp16_flops_per_s"] if major >= 8 else None
    else:
        out["fp32_flops_per_s"] = None
    out["mem_bw_bytes_per_s"] = (mem_clock_mhz * 1e6 * 2 * bus_width_bits / 8
                                 if mem_clock_mhz and bus_width_bits else None)
    out["assumptions"] = ("SMs x FP32 lanes/SM x 2 (FMA) x max SM clock; bandwidth = max memory clock x 2 (DDR) "
                          "x bus width; FP16/BF16 = dense tensor-core rate")
    return out


def flop_peak(peaks: dict[str, Any], dtype: str) -> float | None:
    """The theoretical FLOP/s for a dtype (float64 has no model here: None)."""
    key = {"float32": "fp32_flops_per_s", "float16": "fp16_flops_per_s", "bfloat16": "bf16_flops_per_s"}.get(dtype)
    return peaks.get(key) if key else None


def catalog_peaks(theoretical: dict[str, Any], name: str, *, kind: str,
                  visible_cores: int | None = None) -> dict[str, Any]:
    """A device's theoretical peaks for the ops study, read from its catalog entry where it has one.

    `theoretical` is what dlperf derived from the device's own properties (cores x clock x ISA, or
    NVML's SMs x clock); it stays beside the catalog's figures as `derived_*` for comparison. A GPU takes
    the vendor's FP32, FP16/BF16 and bandwidth. A CPU takes the package's FP32 scaled by the share of
    its cores this machine sees (a VM's slice of a 96-core part gets 2/96 of it); its bandwidth is taken
    only when the whole package is visible. A figure the catalog lacks keeps the derived value.
    """
    out = dict(theoretical)
    dev = match(name) if name else None
    if dev is None or (dev.kind == "cpu") != (kind == "cpu"):
        out["peaks_source"] = "derived on this machine (no catalog entry matches this device)"
        return out
    scale = dev.core_share(visible_cores)
    share = f" x {visible_cores}/{dev.cores} cores visible" if scale != 1.0 else ""
    taken = []
    fp32 = dev.value("peak_fp32_tflops")
    if fp32 is not None:
        out["derived_fp32_flops_per_s"] = theoretical.get("fp32_flops_per_s")
        out["fp32_flops_per_s"] = fp32 * 1e12 * scale
        taken.append("FP32")
    fp16 = dev.value("peak_fp16_tflops")
    if fp16 is not None and kind != "cpu":
        out["derived_fp16_flops_per_s"] = theoretical.get("fp16_flops_per_s")
        out["fp16_flops_per_s"] = fp16 * 1e12
        if theoretical.get("bf16_flops_per_s"):  # the architecture has BF16: the catalog's figure is FP16/BF16
            out["bf16_flops_per_s"] = fp16 * 1e12
        taken.append("FP16/BF16")
    bw = dev.value("memory_bw_gbs")
    if bw is not None and scale == 1.0:
        out["derived_mem_bw_bytes_per_s"] = theoretical.get("mem_bw_bytes_per_s")
        out["mem_bw_bytes_per_s"] = bw * 1e9
        taken.append("bandwidth")
    out["catalog_id"] = dev.id
    if taken:
        out["peaks_source"] = (f"catalog entry {dev.id}: {', '.join(taken)}{share} "
                               f"({dev.source('peak_fp32_tflops')})")
        out["assumptions"] = f"{out['peaks_source']}; derived from the device's properties: " + str(
            theoretical.get("assumptions", ""))
    else:
        out["peaks_source"] = f"catalog entry {dev.id} has no peak figures: derived on this machine"
    return out


def cpu_peaks() -> dict[str, Any]:
    """This machine's CPU peaks as the fingerprint records them: derived here, read from the catalog
    where the CPU has an entry (scaled to the cores visible here)."""
    cores = probe.physical_cores()
    return catalog_peaks(cpu_theoretical(cores, probe.cpu_flags()), probe.cpu_model(), kind="cpu",
                         visible_cores=cores)


def gpu_peaks(gpu: dict[str, Any]) -> dict[str, Any] | None:
    """One GPU's peaks from the properties NVML reported (`probe.nvidia_gpus`), read from the catalog
    where it has an entry; None for a GPU seen without them (through nvidia-smi)."""
    props = gpu.get("properties")
    if props is None:
        return None
    cc, sm_count = props.get("compute_capability"), props.get("sm_count")
    if cc is None or sm_count is None:
        theoretical: dict[str, Any] = {"fp32_flops_per_s": None,
                                       "assumptions": "NVML did not report compute capability or SM count"}
    else:
        theoretical = gpu_theoretical(major=int(cc[0]), minor=int(cc[1]), sm_count=int(sm_count),
                                      sm_clock_mhz=props.get("sm_clock_mhz"),
                                      mem_clock_mhz=props.get("mem_clock_mhz"),
                                      bus_width_bits=props.get("bus_width_bits"))
    return catalog_peaks(theoretical, gpu["name"], kind="gpu")
