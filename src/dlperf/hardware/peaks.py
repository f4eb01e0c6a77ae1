"""Theoretical peaks of this machine: FLOP/s by dtype and memory bandwidth, with their assumptions.

A CPU's FP32 peak is what its cores sustain: the FMA loop of the clock probe (`hardware.clock_probe`,
derived in `hardware.fma_peak`, kept per machine by `hardware.peak_cache`), per core, times the physical cores.
It is a measurement, never a model that could sit above it. The clock under vector load (a dependent FMA chain x
its latency) and the FMA units are recorded beside it, each labelled measured or assumed; so are the scalar
clock and the nominal clock (`nominal_clock_ghz`). Where the probe cannot run (no C compiler), the peak is
cores x the nominal clock x 2 FMA units (assumed) x lanes x 2, and the assumptions say so. BF16/AMX, FP16, INT8
and FP64 peaks are derived from the clock and a per-cycle rate written down per instruction (labelled derived,
not measured).
Each figure carries the assumptions it rests on, and can be overridden:
- DLPERF_CPU_CLOCK_GHZ: the clock the CPU sustains under vector load (the peak becomes the model's, with it).
- DLPERF_CPU_FMA_UNITS: vector FMA units per core (the same; 2 assumed where nothing measured).
- DLPERF_CPU_PEAK_FP32_GFLOPS: the whole FP32 figure, replacing the model.
- DLPERF_MEM_BW_GBS: the memory bandwidth, which cannot be read inside a VM.
A value that is not a finite number > 0 (or, for the FMA units, a whole number) is a `ConfigError`.
GPU peaks come from the device's SM count and clock and a per-architecture table.
Where the device has an entry in the hardware catalog, `catalog_peaks` replaces these derived figures
with the catalog's (sourced) ones and keeps the derived ones beside them; a CPU whose clock was measured
keeps its measured FP32 figure (the catalog's, at the vendor's rated clock, is kept beside it).

Peaks are derived data: they change with the catalog, the overrides and the measured clock on the same
machine, so they are recorded beside a run, never part of the environment's identity (`hardware.identity`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TypedDict

from dlperf.errors import ConfigError
from dlperf.hardware import peak_cache, probe
from dlperf.hardware.catalog_peaks import DevicePeaks, PeakKey, catalog_peaks
from dlperf.hardware.fma_peak import ISA_NAMES, ClockProbe
from dlperf.hardware.probe import GpuRecord

#: The environment variables that override a derived peak (recorded with each run).
OVERRIDES = ("DLPERF_CPU_CLOCK_GHZ", "DLPERF_CPU_FMA_UNITS", "DLPERF_CPU_PEAK_FP32_GFLOPS", "DLPERF_MEM_BW_GBS")
#: Overrides that must be whole numbers.
_WHOLE = ("DLPERF_CPU_FMA_UNITS",)
#: CPU flags (beyond `probe.cpu_flags`) that decide the per-dtype peaks.
DTYPE_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "amx_int8", "amx_fp16", "avx512_fp16", "avx512_vnni", "avx_vnni",
                         "asimddp", "asimdhp"})

#: FP32 lanes of one vector register, by the widest ISA present.
_VECTOR_BITS = (("avx512f", 512), ("avx2", 256), ("avx", 256), ("asimd", 128), ("neon", 128))

#: Per compute capability: FP32 lanes per SM, and dense FP16/BF16 tensor-core FLOPs per SM per clock.
#: (Volta/Turing/Ampere/Ada/Hopper whitepapers; FP16 figures are dense, without sparsity.)
class GpuArch(TypedDict):
    """One architecture's row of `GPU_ARCH`."""

    name: str
    fp32_lanes_per_sm: int
    fp16_tc_flops_per_sm_clk: int | None


GPU_ARCH: dict[tuple[int, int], GpuArch] = {
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


def env_number(name: str) -> float | None:
    """An override's value; None where unset or empty. Not a finite number > 0 (or, for `_WHOLE`, not a
    whole number): a one-line `ConfigError` naming the variable and the value."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} is not a finite number")
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be greater than 0")
    if name in _WHOLE and value != int(value):
        raise ConfigError(f"{name}={raw!r} must be a whole number (1, 2, ...)")
    return value


def check_overrides() -> None:
    """Every `OVERRIDES` variable set is usable, or a `ConfigError` says which is not."""
    for name in OVERRIDES:
        env_number(name)


def nominal_clock_ghz() -> tuple[float | None, str]:
    """(the clock the OS reports in GHz, where it came from): cpufreq's maximum, else /proc/cpuinfo."""
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
    """The `OVERRIDES` set in this process's environment, as set (each checked: `ConfigError` if unusable)."""
    check_overrides()
    return {name: os.environ[name] for name in OVERRIDES if os.environ.get(name, "").strip()}


def _ghz(v: float | None) -> str:
    return "?" if v is None else f"{v:.3g}"


def _measured_text(clock: ClockProbe, cores: int) -> str:
    """What the probe measured, for the FP32 peak's label: the loop, its threads, spread and origin."""
    per_core, isa = (clock.fma_flops_per_s_per_core or 0) / 1e9, ISA_NAMES.get(clock.isa or "", clock.isa)
    rates = clock.tries_fma_flops_per_s_per_core
    tries = (f"; kept from {clock.tries} probes that ran {min(rates) / 1e9:.1f}-{max(rates) / 1e9:.1f} GFLOP/s "
             "per core" if clock.tries > 1 and rates else "")
    speedup, ran = clock.one_core_speedup, [r for r in clock.tries_one_thread_fma_flops_per_s if r > 0]
    over = (f", {min(ran) / 1e9:.1f}-{max(ran) / 1e9:.1f} over {len(ran)} probes" if len(ran) > 1 else "")
    alone = (f"; one thread alone {(clock.one_thread_fma_flops_per_s or 0) / 1e9:.1f} GFLOP/s ({speedup:.2f}x{over})"
             if speedup is not None and clock.threads > 1 else "")
    return (f"measured: {cores} cores x {per_core:.1f} GFLOP/s per core, the {isa} "
            f"loop's throughput per CPU second ({clock.threads} threads, spread "
            f"{100 * (clock.fma_spread_rel or 0):.1f}%{', on a busy machine' if clock.busy else ''}{tries}{alone}; "
            f"{clock.origin})")


def _clock_text(clock: ClockProbe, units: int | None, lanes: int) -> str:
    """Which clock the peaks use, and the clocks beside it: the FMA loop's own, the vector clock, the scalar one."""
    scalar = f"scalar add-chain clock {_ghz(clock.scalar_clock_ghz)} GHz (not used for vector work)"
    vector = f"vector clock {_ghz(clock.vector_clock_ghz)} GHz ({clock.vector_clock_source})"
    if clock.clock_ghz is None:
        return f"not determined under FMA load: {vector}; {scalar}"
    if str(clock.fma_units_source).startswith("assumed"):  # the units were not measured: nor is this clock
        return (f"derived: {_ghz(clock.clock_ghz)} GHz, the FMA loop's own at an assumed {units} units (its "
                f"throughput / ({units} units x {lanes} lanes x 2)); {vector}; {scalar}")
    return (f"measured: {_ghz(clock.clock_ghz)} GHz, the FMA loop's own (its throughput / ({units} units x {lanes} "
            f"lanes x 2)); {vector}; {scalar}")


def cpu_theoretical(physical_cores: int, flags: list[str] | frozenset[str],
                    clock: ClockProbe | None = None) -> DevicePeaks:
    """FP32 (and FP64, BF16, FP16, INT8 where the ISA has them) peaks of the CPU, every assumption spelled out.

    `clock` is the clock probe's result (`peak_cache.sustained()`): its FMA loop's throughput is the FP32 peak.
    None, or a probe that could not measure, leaves the nominal clock and 2 FMA units per core (assumed), and the
    assumptions say so. An override of the clock or the units makes the peak the model's, with them.
    """
    check_overrides()
    flags = frozenset(flags)
    nominal, nominal_source = nominal_clock_ghz()
    measured = clock is not None and clock.measured
    if measured:
        assert clock is not None and clock.lanes
        lanes, flops_per_lane = clock.lanes, 2  # the probe counts a multiply+add pair as an FMA unit
    else:
        lanes = next((b for flag, b in _VECTOR_BITS if flag in flags), 128) // 32
        flops_per_lane = 2 if {"fma", "avx512f", "asimd"} & flags else 1
    clock_override, units_override = env_number("DLPERF_CPU_CLOCK_GHZ"), env_number("DLPERF_CPU_FMA_UNITS")
    why_not = clock.method if clock is not None and not measured else "no clock probe was run"
    if units_override:
        units, units_source = int(units_override), "DLPERF_CPU_FMA_UNITS"
    elif measured and clock is not None and clock.fma_units:
        units, units_source = clock.fma_units, str(clock.fma_units_source)
    elif measured and clock is not None:
        units, units_source = None, str(clock.fma_units_source)
    else:
        units, units_source = 2, "assumed 2 (not measured; set DLPERF_CPU_FMA_UNITS)"
    if clock_override:
        ghz, clock_source = clock_override, "DLPERF_CPU_CLOCK_GHZ"
    elif measured and clock is not None:
        ghz, clock_source = clock.clock_ghz, _clock_text(clock, units, lanes)
        if units_override:  # the loop's own clock assumed the measured units: the vector clock is the one
            ghz = clock.vector_clock_ghz or clock.clock_ghz
            clock_source = f"measured: vector clock {_ghz(ghz)} GHz ({clock.vector_clock_source})"
    else:
        ghz, clock_source = nominal, f"{nominal_source}: nominal, not measured ({why_not})"
    if units is None and (clock_override or not measured):
        units, units_source = 2, f"assumed 2 ({units_source})"
    per_cycle = units * lanes * flops_per_lane if units else None
    model = (f"{physical_cores} cores x {_ghz(ghz)} GHz x {units if units else '?'} FMA units x {lanes} FP32 lanes "
             f"x {flops_per_lane} (FMA = 2 FLOPs)")
    out: DevicePeaks = {
        "physical_cores": physical_cores,
        "clock_ghz": ghz,
        "clock_source": clock_source,
        "clock_measured": (measured and ghz is not None and not clock_override
                           and not clock_source.startswith("derived")),  # at assumed units: derived
        "nominal_clock_ghz": nominal,
        "nominal_clock_source": nominal_source,
        "vector_bits": lanes * 32,
        "fma_units_per_core": units,
        "fma_units_source": units_source,
        "fp32_flops_per_cycle_per_core": per_cycle,
    }
    if measured and clock is not None:
        out.update({"measured_fma_flops_per_s": clock.fma_flops_per_s_total,
                    "vector_clock_ghz": clock.vector_clock_ghz, "scalar_clock_ghz": clock.scalar_clock_ghz,
                    "peak_origin": clock.origin})
        if clock.one_core_speedup is not None:
            out["one_core_fma_speedup"] = round(clock.one_core_speedup, 3)
    override = env_number("DLPERF_CPU_PEAK_FP32_GFLOPS")
    named = [n for n, v in (("DLPERF_CPU_CLOCK_GHZ", clock_override), ("DLPERF_CPU_FMA_UNITS", units_override)) if v]
    if override:
        out["fp32_flops_per_s"], out["fp32_source"] = override * 1e9, "DLPERF_CPU_PEAK_FP32_GFLOPS"
        out["fp32_basis"] = f"set by DLPERF_CPU_PEAK_FP32_GFLOPS={override:g}, not measured"
    elif measured and clock is not None and not named:
        out["fp32_flops_per_s"] = physical_cores * (clock.fma_flops_per_s_per_core or 0.0)
        out["fp32_source"], out["fp32_basis"] = "measured", _measured_text(clock, physical_cores)
    else:
        out["fp32_flops_per_s"] = physical_cores * ghz * 1e9 * per_cycle if ghz and per_cycle else None
        out["fp32_source"] = "+".join(named) or "nominal"
        out["fp32_basis"] = (f"model: {model}; set: {', '.join(named)}" if named else
                             f"model at the nominal clock, not measured: {model}; FMA units: {units_source}")
    out["assumptions"] = (f"FP32: {out['fp32_basis']}; {model}; clock: {clock_source}; FMA units: {units_source}; "
                          f"nominal clock {_ghz(nominal)} GHz ({nominal_source})")
    out.update(_dtype_peaks(physical_cores, ghz, flags, units, lanes, per_cycle))
    bw = env_number("DLPERF_MEM_BW_GBS")
    out["mem_bw_bytes_per_s"] = bw * 1e9 if bw else None
    out["mem_bw_source"] = "DLPERF_MEM_BW_GBS" if bw else (
        "unknown: DIMM speed and channels are not readable here (set DLPERF_MEM_BW_GBS); "
        "the measured copy bandwidth of `dlperf peaks` is used as the ceiling")
    return out


def _dtype_rates(flags: frozenset[str], units: int, lanes: int, fp32: int) -> dict[str, tuple[float | None, str]]:
    """Per core per cycle, by dtype: (operations, the instruction and rate assumed) or (None, why none)."""
    vnni_lanes = lanes if "avx512_vnni" in flags else min(lanes, 8)  # AVX-VNNI is 256 bits wide
    return {
        "fp64": (fp32 / 2, "FP64: half the FP32 lanes at the same FMA rate"),
        "bf16": ((1024, "AMX TDPBF16PS: 16x16x32 BF16 multiply-adds per 16 cycles = 1024 FLOP/cycle")
                 if "amx_bf16" in flags else
                 (2 * fp32, "VDPBF16PS: 2 BF16 products per FP32 lane per FMA unit = 2x the FP32 rate")
                 if "avx512_bf16" in flags else (None, "no BF16 instructions (avx512_bf16, amx_bf16)")),
        "fp16": ((1024, "AMX TDPFP16PS: 16x16x32 FP16 multiply-adds per 16 cycles = 1024 FLOP/cycle")
                 if "amx_fp16" in flags else
                 (2 * fp32, "FP16 FMA on twice the FP32 lanes (VFMADDPH / FMLA .8h) = 2x the FP32 rate")
                 if {"avx512_fp16", "asimdhp"} & flags else
                 (None, "no FP16 arithmetic (avx512_fp16, amx_fp16, asimdhp): FP16 is converted and computed in FP32")),
        "int8": ((2048, "AMX TDPBSSD: 16x16x64 INT8 multiply-adds per 16 cycles = 2048 ops/cycle")
                 if "amx_int8" in flags else
                 (units * vnni_lanes * 8, f"VPDPBUSD ({vnni_lanes * 32}-bit): 4 INT8 multiply-adds per 32-bit lane "
                                          f"per FMA unit = {units} x {vnni_lanes} x 8 ops/cycle")
                 if {"avx512_vnni", "avx_vnni"} & flags else
                 (units * lanes * 8, f"SDOT: 4 INT8 multiply-adds per 32-bit lane = {units} x {lanes} x 8 ops/cycle")
                 if "asimddp" in flags else (None, "no INT8 dot-product instructions (VNNI, AMX, SDOT)")),
    }


#: Each dtype of `_dtype_rates` and the key of its peak, in the order the peaks are written.
_DTYPE_KEYS: dict[str, PeakKey] = {"fp64": "fp64_flops_per_s", "bf16": "bf16_flops_per_s",
                                   "fp16": "fp16_flops_per_s", "int8": "int8_ops_per_s"}


def _dtype_peaks(cores: int, ghz: float | None, flags: frozenset[str], units: int | None, lanes: int,
                 fp32_per_cycle: int | None) -> DevicePeaks:
    """fp64/bf16/fp16 FLOP/s and int8 op/s from the clock and `_dtype_rates`, each labelled derived."""
    out: DevicePeaks = {}
    notes: dict[str, str] = {}
    if not units or not fp32_per_cycle:
        for key in _DTYPE_KEYS.values():
            out[key] = None
        why = "no FMA units per core known (the probe could not derive them)"
        out["dtype_peaks_source"] = {d: why for d in ("fp64", "bf16", "fp16", "int8")}
        return out
    for dtype, (rate, how) in _dtype_rates(flags, units, lanes, fp32_per_cycle).items():
        key = _DTYPE_KEYS[dtype]
        if rate is None or not ghz:
            out[key] = None
            notes[dtype] = how if rate is None else "no clock under vector load known"
            continue
        out[key] = cores * ghz * 1e9 * rate
        notes[dtype] = f"derived (not measured): {cores} cores x {_ghz(ghz)} GHz x {rate:g}/cycle; {how}"
    out["dtype_peaks_source"] = notes
    return out


def gpu_theoretical(*, major: int, minor: int, sm_count: int, sm_clock_mhz: float | None,
                    mem_clock_mhz: float | None, bus_width_bits: int | None) -> DevicePeaks:
    """A GPU's FP32/FP16 peaks and bandwidth from its properties and the architecture table."""
    arch = GPU_ARCH.get((major, minor))
    out: DevicePeaks = {"compute_capability": f"{major}.{minor}", "sm_count": sm_count,
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


#: A dtype as the studies name it and the key of its peak in `DevicePeaks`.
_PEAK_OF_DTYPE: dict[str, PeakKey] = {"float32": "fp32_flops_per_s", "float16": "fp16_flops_per_s",
                                      "bfloat16": "bf16_flops_per_s", "float64": "fp64_flops_per_s",
                                      "int8": "int8_ops_per_s"}


def flop_peak(peaks: DevicePeaks, dtype: str) -> float | None:
    """The theoretical FLOP/s for a dtype (op/s for int8); None where the device has no figure for it."""
    key = _PEAK_OF_DTYPE.get(dtype)
    return peaks.get(key) if key else None


def flop_peak_origin(peaks: DevicePeaks, dtype: str) -> str:
    """What the dtype's peak is, in words for a ceiling's label: the FP32 figure of a CPU is the FMA loop's
    measured throughput where it was measured (`fp32_source`), a setting where one was given, else a model."""
    if dtype == "float32":
        source = peaks.get("fp32_source")
        if source == "measured":
            return "measured float32 peak (FMA loop)"
        if source and source not in ("nominal", "catalog"):
            return f"float32 peak from {source}"
    return f"theoretical {dtype} peak"


def cpu_peaks() -> DevicePeaks:
    """This machine's CPU peaks as the fingerprint records them: from the clock measured here (the probe is
    skipped where DLPERF_CPU_CLOCK_GHZ and DLPERF_CPU_FMA_UNITS both replace it), read from the catalog where
    the CPU has an entry and nothing was measured (scaled to the cores visible here)."""
    check_overrides()
    cores = probe.physical_cores()
    flags = frozenset(probe.cpu_flags()) | (probe.cpu_flag_set() & DTYPE_FLAGS)
    both = env_number("DLPERF_CPU_CLOCK_GHZ") and env_number("DLPERF_CPU_FMA_UNITS")
    clock = None if both else peak_cache.sustained()
    return catalog_peaks(cpu_theoretical(cores, flags, clock), probe.cpu_model(), kind="cpu", visible_cores=cores)


def clock_line(peaks: DevicePeaks) -> str:
    """One line for `hw show`: the clock the CPU peak assumes, how it was found, and the nominal clock."""
    source = str(peaks.get("clock_source", "unknown"))
    clock = source if source.startswith(("measured", "derived")) else f"{_ghz(peaks.get('clock_ghz'))} GHz ({source})"
    return (f"CPU clock for the peaks: {clock}; nominal clock {_ghz(peaks.get('nominal_clock_ghz'))} GHz "
            f"({peaks.get('nominal_clock_source', 'unknown')}); FP32 peak {_gflops(peaks.get('fp32_flops_per_s'))} "
            f"GFLOP/s ({peaks.get('fp32_basis') or peaks.get('fp32_source') or 'unknown'})")


def _gflops(v: float | None) -> str:
    return "unknown" if not v else f"{v / 1e9:.1f}"


def gpu_peaks(gpu: GpuRecord) -> DevicePeaks | None:
    """One GPU's peaks from the properties NVML reported (`probe.nvidia_gpus`), read from the catalog
    where it has an entry; None for a GPU seen without them (through nvidia-smi)."""
    props = gpu.get("properties")
    if props is None:
        return None
    cc, sm_count = props.get("compute_capability"), props.get("sm_count")
    if cc is None or sm_count is None:
        theoretical: DevicePeaks = {"fp32_flops_per_s": None,
                                    "assumptions": "NVML did not report compute capability or SM count"}
    else:
        theoretical = gpu_theoretical(major=int(cc[0]), minor=int(cc[1]), sm_count=int(sm_count),
                                      sm_clock_mhz=props.get("sm_clock_mhz"),
                                      mem_clock_mhz=props.get("mem_clock_mhz"),
                                      bus_width_bits=props.get("bus_width_bits"))
    return catalog_peaks(theoretical, gpu["name"], kind="gpu")
