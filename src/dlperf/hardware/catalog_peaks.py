"""A device's peaks taken from the hardware catalog where it has an entry (a GPU's datasheet figures; a CPU's FP32
where none was measured here), the figures derived on this machine kept beside them."""

from __future__ import annotations

from typing import Literal, TypedDict

from dlperf.hardware.catalog import match

#: The keys of `DevicePeaks` that hold a dtype's peak (FLOP/s; op/s for int8).
PeakKey = Literal["fp32_flops_per_s", "fp16_flops_per_s", "bf16_flops_per_s", "fp64_flops_per_s", "int8_ops_per_s"]


class DevicePeaks(TypedDict, total=False):
    """A device's theoretical peaks as the fingerprint stores them (`cpu_peaks_theoretical`, a GPU's
    `peaks_theoretical`): what `peaks.cpu_theoretical` or `peaks.gpu_theoretical` derived, with the catalog's
    figures laid over them by `catalog_peaks`. Keys vary by device kind and by what was measured or matched."""

    # a CPU's model (`peaks.cpu_theoretical`)
    physical_cores: int
    clock_ghz: float | None
    clock_source: str
    clock_measured: bool
    nominal_clock_ghz: float | None
    nominal_clock_source: str
    vector_bits: int
    fma_units_per_core: int | None
    fma_units_source: str
    fp32_flops_per_cycle_per_core: int | None
    measured_fma_flops_per_s: float | None
    one_core_fma_speedup: float  # one probe thread's FMA rate over the all-core rate per core (`roofline.cpu_share`)
    vector_clock_ghz: float | None
    scalar_clock_ghz: float | None
    peak_origin: str
    fp32_source: str
    fp32_basis: str
    dtype_peaks_source: dict[str, str]
    mem_bw_source: str
    # a GPU's model (`peaks.gpu_theoretical`)
    compute_capability: str
    sm_count: int
    sm_clock_mhz: float | None
    architecture: str
    # both
    fp32_flops_per_s: float | None
    fp64_flops_per_s: float | None
    bf16_flops_per_s: float | None
    fp16_flops_per_s: float | None
    int8_ops_per_s: float | None
    mem_bw_bytes_per_s: float | None
    assumptions: str
    # the catalog's (`catalog_peaks`)
    catalog_fp32_flops_per_s: float
    derived_fp32_flops_per_s: float | None
    derived_fp16_flops_per_s: float | None
    derived_int8_ops_per_s: float | None
    derived_mem_bw_bytes_per_s: float | None
    catalog_id: str
    peaks_source: str


def catalog_peaks(theoretical: DevicePeaks, name: str, *, kind: str,
                  visible_cores: int | None = None) -> DevicePeaks:
    """A device's theoretical peaks for the ops study, read from its catalog entry where it has one.

    `theoretical` is what dlperf derived from the device's own properties (cores x clock x ISA, or
    NVML's SMs x clock); it stays beside the catalog's figures as `derived_*` for comparison. A GPU takes
    the vendor's FP32, FP16/BF16, INT8 and bandwidth. A CPU whose FP32 was derived from the nominal clock
    takes the package's FP32 scaled by the share of its cores this machine sees (a VM's slice of a 96-core
    part gets 2/96 of it); one measured here (or set by an override) keeps its own, the catalog's beside it.
    A CPU's bandwidth is taken only when the whole package is visible. A figure the catalog lacks keeps the
    derived value.
    """
    out = theoretical.copy()
    dev = match(name) if name else None
    if dev is None or (dev.kind == "cpu") != (kind == "cpu"):
        out["peaks_source"] = ("FP32 measured on this machine, other dtypes derived from its clock (no catalog entry "
                               "matches this device)" if theoretical.get("fp32_source") == "measured" else
                               "derived on this machine (no catalog entry matches this device)")
        return out
    scale = dev.core_share(visible_cores)
    share = f" x {visible_cores}/{dev.cores} cores visible" if scale != 1.0 else ""
    taken, kept = [], ""
    fp32 = dev.value("peak_fp32_tflops")
    if fp32 is not None and kind == "cpu" and theoretical.get("fp32_source", "nominal") != "nominal":
        # This machine's cores were measured (or the user set their clock or peak): the datasheet's figure,
        # at the vendor's rated clock, is kept beside it, never put in its place.
        out["catalog_fp32_flops_per_s"] = fp32 * 1e12 * scale
        kept = (f"; FP32 {theoretical['fp32_source']} here, the catalog's {fp32 * 1e3 * scale:.1f} GFLOP/s{share} "
                f"(at the {dev.peak_clock} clock) kept as catalog_fp32_flops_per_s")
    elif fp32 is not None:
        out["derived_fp32_flops_per_s"] = theoretical.get("fp32_flops_per_s")
        out["fp32_flops_per_s"] = fp32 * 1e12 * scale
        taken.append(f"FP32 at the {dev.peak_clock} clock")
    fp16 = dev.value("peak_fp16_tflops")
    if fp16 is not None and kind != "cpu":
        out["derived_fp16_flops_per_s"] = theoretical.get("fp16_flops_per_s")
        out["fp16_flops_per_s"] = fp16 * 1e12
        if theoretical.get("bf16_flops_per_s"):  # the architecture has BF16: the catalog's figure is FP16/BF16
            out["bf16_flops_per_s"] = fp16 * 1e12
        taken.append("FP16/BF16")
    int8 = dev.value("peak_int8_tops")
    if int8 is not None and kind != "cpu":
        out["derived_int8_ops_per_s"] = theoretical.get("int8_ops_per_s")
        out["int8_ops_per_s"] = int8 * 1e12
        taken.append("INT8")
    bw = dev.value("memory_bw_gbs")
    if bw is not None and scale == 1.0:
        out["derived_mem_bw_bytes_per_s"] = theoretical.get("mem_bw_bytes_per_s")
        out["mem_bw_bytes_per_s"] = bw * 1e9
        taken.append("bandwidth")
    out["catalog_id"] = dev.id
    if taken:
        out["peaks_source"] = (f"catalog entry {dev.id}: {', '.join(taken)}{share} "
                               f"({dev.source('peak_fp32_tflops')}){kept}")
        out["assumptions"] = f"{out['peaks_source']}; derived from the device's properties: " + str(
            theoretical.get("assumptions", ""))
    elif kept:
        out["peaks_source"] = f"catalog entry {dev.id}{kept}"
    else:
        out["peaks_source"] = f"catalog entry {dev.id} has no peak figures: derived on this machine"
    return out
