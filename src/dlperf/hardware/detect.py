"""This machine's devices mapped onto the catalog; an unknown CPU or GPU gets an entry derived here
(cores, clock, vector ISA; or NVML's properties), marked `detected` and sourced as such."""

from __future__ import annotations

from typing import Any

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
    from dlperf.hardware.fingerprint import cpu_model

    model = cpu_model()
    found = _cpu_entry(model)
    if found is not None:
        return found, f"catalog match for {model!r}"
    return _as_seen_here(model, None), "derived (not in the catalog)"


def this_cpu() -> Device | None:
    """This machine's CPU as it is here (`_as_seen_here`), unless its catalog entry already describes it.
    A recommend candidate; `hw show` prints it beside a catalog entry of which it is a slice."""
    from dlperf.hardware.fingerprint import cpu_model, physical_cores

    model = cpu_model()
    entry = _cpu_entry(model)
    if entry is not None and entry.core_share(physical_cores()) == 1.0 and entry.value("peak_fp32_tflops") is not None:
        return None  # the catalog entry is this machine
    return _as_seen_here(model, entry)


def _as_seen_here(model: str, entry: Device | None) -> Device:
    """This machine's CPU: the cores it sees, their FP32 peak (the catalog's, scaled to those cores, or
    derived here) and, where the catalog knows the package (`entry`), its TDP and price scaled the same
    way. Marked `detected`; every scaled or derived figure is listed in `derived`."""
    from dlperf.hardware.fingerprint import cpu_flags, physical_cores
    from dlperf.hardware.peaks import cpu_theoretical

    cores, flags = physical_cores(), cpu_flags()
    share = entry.core_share(cores) if entry is not None else 1.0
    derived_peaks = cpu_theoretical(cores, flags)
    peaks = catalog_peaks(derived_peaks, model, kind="cpu", visible_cores=cores)
    fp32, bw = peaks.get("fp32_flops_per_s"), peaks.get("mem_bw_bytes_per_s")

    def scaled(field: str) -> float | None:
        v = entry.value(field) if entry is not None else None
        return v * share if v is not None else None

    tdp, price = scaled("tdp_w"), scaled("launch_price_usd")
    isa = next((f for f in ("avx512f", "avx2", "avx", "sse4_2", "asimd") if f in flags), "unknown ISA")
    hardware = (f"{cores} physical cores, {derived_peaks['vector_bits']}-bit vectors ({isa}), "
                f"{derived_peaks['clock_ghz'] or '?'} GHz ({derived_peaks['clock_source']})")
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
        **_unknowns(peak_fp32_tflops=fp32 / 1e12 if fp32 else None, memory_bw_gbs=bw / 1e9 if bw else None,
                    tdp_w=tdp, launch_price_usd=price),
        derived=[f for f, v in (("peak_fp32_tflops", fp32), ("memory_bw_gbs", bw), ("tdp_w", tdp),
                                ("launch_price_usd", price)) if v],
        notes=f"This machine's CPU, {how}: {peaks.get('peaks_source', '')}; {peaks.get('assumptions', '')}",
        sources={"default": DERIVED_SOURCE.format(how=f"/proc/cpuinfo and the catalog ({how})")}, detected=True)


def detect_gpus() -> list[tuple[Device, str]]:
    """Each NVIDIA GPU NVML sees: its catalog entry, or one derived from NVML's properties."""
    from dlperf.hardware.fingerprint import nvidia_gpus

    gpus, _how = nvidia_gpus()
    out = []
    for g in gpus:
        found = match(g["name"])
        if found is not None:
            out.append((found, f"catalog match for {g['name']!r} (GPU {g['index']})"))
            continue
        p = g.get("peaks_theoretical") or {}
        fp32, fp16, bw = p.get("fp32_flops_per_s"), p.get("fp16_flops_per_s"), p.get("mem_bw_bytes_per_s")
        out.append((Device(
            id=f"this-gpu-{g['index']}", name=g["name"], vendor="NVIDIA", kind="gpu",
            architecture=p.get("architecture", "unknown"), memory_type="unknown", interface="unknown",
            **_unknowns(memory_gb=g["memory_bytes"] / 1e9, peak_fp32_tflops=fp32 / 1e12 if fp32 else None,
                        peak_fp16_tflops=fp16 / 1e12 if fp16 else None, memory_bw_gbs=bw / 1e9 if bw else None),
            derived=[f for f, v in (("peak_fp32_tflops", fp32), ("peak_fp16_tflops", fp16), ("memory_bw_gbs", bw))
                     if v],
            notes=f"Not in the catalog; {p.get('assumptions', 'no peaks')}.",
            sources={"default": DERIVED_SOURCE.format(how="NVML device properties")}, detected=True),
            "derived (not in the catalog)"))
    return out


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
