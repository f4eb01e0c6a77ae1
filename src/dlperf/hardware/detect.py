"""This machine's devices mapped onto the catalog; an unknown CPU or GPU gets an entry derived here
(cores, clock, vector ISA; or NVML's properties), marked `detected` and sourced as such."""

from __future__ import annotations

from typing import Any

from dlperf.hardware import peaks, probe
from dlperf.hardware.catalog import FIGURES, Device, match

DERIVED_SOURCE = "derived on this machine by dlperf (not a datasheet): {how}"


def _unknowns(**known: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict.fromkeys(FIGURES, "unknown")
    fields.update({k: v for k, v in known.items() if v is not None})
    return fields


def _cpu_entry(model: str) -> Device | None:
    found = match(model)
    return found if found is not None and found.kind == "cpu" else None


def detect_cpu() -> tuple[Device, str]:
    """(entry, how it was found): the catalog's entry for this CPU, or one derived from /proc/cpuinfo."""
    model = probe.cpu_model()
    found = _cpu_entry(model)
    if found is not None:
        return found, f"catalog match for {model!r}"
    return _as_seen_here(model, None), "derived (not in the catalog)"


def this_cpu() -> Device | None:
    """This machine's CPU as it is here (`_as_seen_here`), unless its catalog entry already describes it.
    A recommend candidate; `hw show` prints it beside a catalog entry of which it is a slice."""
    model = probe.cpu_model()
    entry = _cpu_entry(model)
    if (entry is not None and entry.core_share(probe.physical_cores()) == 1.0
            and entry.value("peak_fp32_tflops") is not None):
        return None  # the catalog entry is this machine
    return _as_seen_here(model, entry)


def _as_seen_here(model: str, entry: Device | None) -> Device:
    """This machine's CPU: the cores it sees, their FP32 peak (the catalog's, scaled to those cores, or
    derived here) and, where the catalog knows the package (`entry`), its TDP and price scaled the same
    way. Marked `detected`; every scaled or derived figure is listed in `derived`."""
    cores, flags = probe.physical_cores(), probe.cpu_flags()
    share = entry.core_share(cores) if entry is not None else 1.0
    read = peaks.cpu_peaks()  # the fingerprint's figures: derived here, the catalog's where it has them
    fp32, bw = read.get("fp32_flops_per_s"), read.get("mem_bw_bytes_per_s")
    fp16, int8 = read.get("fp16_flops_per_s"), read.get("int8_ops_per_s")  # derived from the clock, labelled

    def scaled(field: str) -> float | None:
        v = entry.value(field) if entry is not None else None
        return v * share if v is not None else None

    tdp, price = scaled("tdp_w"), scaled("launch_price_usd")
    ghz = read.get("clock_ghz")
    mhz: float | None
    if read.get("clock_measured"):  # a measured clock is never None (`peaks.cpu_theoretical`)
        basis, mhz = "measured", ghz * 1e3 if ghz is not None else None
    elif str(read.get("clock_source", "")).startswith("derived"):  # the FMA loop's rate at assumed FMA units
        basis, mhz = "derived", ghz * 1e3 if ghz is not None else None
    elif entry is not None and "catalog_id" in read and "derived_fp32_flops_per_s" in read:  # the catalog's FP32
        basis, mhz = entry.peak_clock, entry.value("peak_clock_mhz")
    else:  # nominal or set by an override: said in the notes
        basis, mhz = "unknown", ghz * 1e3 if ghz else None
    isa = next((f for f in ("avx512f", "avx2", "avx", "sse4_2", "asimd") if f in flags), "unknown ISA")
    clock = f"{read['clock_ghz']:.2f} GHz" if read.get("clock_ghz") else "? GHz"
    hardware = (f"{cores} physical cores, {read['vector_bits']}-bit vectors ({isa}), {clock} "
                f"({read['clock_source'].split(' (')[0]})")
    if entry is None:
        how = "not in the catalog"
        vendor = "AMD" if "amd" in model.lower() else "Intel" if "intel" in model.lower() else "unknown"
    else:
        how = (f"{cores} of the {entry.cores} cores of catalog entry {entry.id}" if share != 1.0
               else f"catalog entry {entry.id}, FP32 derived here")
        vendor = entry.vendor
    return Device(
        id="this-cpu", name=model or "this machine's CPU", vendor=vendor, kind="cpu",
        architecture=f"this machine: {hardware}; {how}", memory_type="unknown", interface="host",
        peak_clock=basis,
        **_unknowns(peak_fp32_tflops=fp32 / 1e12 if fp32 else None, memory_bw_gbs=bw / 1e9 if bw else None,
                    peak_fp16_tflops=fp16 / 1e12 if fp16 else None, peak_int8_tops=int8 / 1e12 if int8 else None,
                    tdp_w=tdp, launch_price_usd=price, peak_clock_mhz=mhz),
        derived=[f for f, v in (("peak_fp32_tflops", fp32), ("memory_bw_gbs", bw), ("peak_fp16_tflops", fp16),
                                ("peak_int8_tops", int8), ("tdp_w", tdp), ("launch_price_usd", price),
                                ("peak_clock_mhz", mhz)) if v],
        notes=f"This machine's CPU, {how}: {read.get('peaks_source', '')}; {read.get('assumptions', '')}",
        sources={"default": DERIVED_SOURCE.format(how=f"/proc/cpuinfo and the catalog ({how})")}, detected=True)


def detect_gpus() -> list[tuple[Device, str]]:
    """Each NVIDIA GPU NVML sees: its catalog entry, or one derived from NVML's properties."""
    gpus, _how = probe.nvidia_gpus()
    out = []
    for g in gpus:
        found = match(g["name"])
        if found is not None:
            out.append((found, f"catalog match for {g['name']!r} (GPU {g['index']})"))
            continue
        p = peaks.gpu_peaks(g) or {}
        fp32, fp16, bw = p.get("fp32_flops_per_s"), p.get("fp16_flops_per_s"), p.get("mem_bw_bytes_per_s")
        out.append((Device(
            id=f"this-gpu-{g['index']}", name=g["name"], vendor="NVIDIA", kind="gpu",
            architecture=p.get("architecture", "unknown"), memory_type="unknown", interface="unknown",
            peak_clock="boost" if p.get("sm_clock_mhz") else "unknown",  # NVML's maximum SM clock
            **_unknowns(memory_gb=g["memory_bytes"] / 1e9, peak_clock_mhz=p.get("sm_clock_mhz"),
                        peak_fp32_tflops=fp32 / 1e12 if fp32 else None,
                        peak_fp16_tflops=fp16 / 1e12 if fp16 else None, memory_bw_gbs=bw / 1e9 if bw else None),
            derived=[f for f, v in (("peak_fp32_tflops", fp32), ("peak_fp16_tflops", fp16), ("memory_bw_gbs", bw))
                     if v],
            notes=f"Not in the catalog; {p.get('assumptions', 'no peaks')}.",
            sources={"default": DERIVED_SOURCE.format(how="NVML device properties")}, detected=True),
            "derived (not in the catalog)"))
    return out
