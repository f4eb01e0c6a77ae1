"""`dlperf recommend`: which devices of the catalog would train this CNN or source, how fast, at what cost.

Every figure here is an ESTIMATE, made from the model definition and the catalog:
- memory: parameters, gradients, momentum, input and activations for the batch (`models.memory`), checked
  against the device's memory: the catalog's, or for this machine's CPU the host's RAM (`memory_here`); a
  device whose memory is unknown (a catalog CPU, whose memory is its host's) never qualifies unchecked;
- time per step: a roofline, max(training FLOPs / peak FLOP/s, traffic bytes / bandwidth), divided by
  an efficiency: the fraction of its roofline this user's own hardware reached on this workload
  (stored cnn results, nearest batch and image size, same device kind), else `DEFAULT_EFFICIENCY`.
Where a device was also measured, the estimate is set against the measurement, the efficiency for
that comparison taken from the device's *other* measurements (leave one out), so the error is honest.
A source (`--model SOURCE`) brings its own FLOPs, memory and traffic (`source_costs.SourceCosts`, counted on its
eager module) in `Request.costs`; nothing stored calibrates it, so its efficiency is given or the default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from dlperf.hardware.catalog import Device
from dlperf.hardware.measured import CnnRow
from dlperf.hardware.source_costs import SourceCosts
from dlperf.models import MODELS, get_spec
from dlperf.models.memory import TrainMemory, train_memory, train_traffic_bytes
from dlperf.models.spec import train_flops

#: Fraction of the roofline assumed when no device of the candidate's kind was measured. A round
#: figure, not a measurement: this project measured 19-29% of the FP32 peak for AlexNet and GoogLeNet
#: training at batch 32 on a 2-core AVX-512 CPU (torch and TensorFlow). Override with --efficiency.
DEFAULT_EFFICIENCY = 0.25
FAMILIES = ("cnn",)


@dataclass(frozen=True)
class Request:
    model: str  # a CNN's name, or a source's text (with `costs`)
    batch: int
    image_size: int | None  # a CNN's; None for a source
    precision: str = "fp32"
    target_ips: float | None = None
    budget_usd: float | None = None
    max_power_w: float | None = None
    efficiency: float | None = None  # the user's override
    costs: SourceCosts | None = None  # a source's step, counted (None: a CNN's, from its definition)

    @property
    def rate_unit(self) -> str:
        """What a sample is called in rates: a CNN's images, a source's samples."""
        return "img/s" if self.costs is None else "samples/s"


class Estimate(TypedDict):
    """One device's estimate (`estimate`): memory need and fit, and, where the catalog gives its peak, images/s
    and what binds; `rank` adds its place and the reason for it."""

    device: Device
    memory_bytes: int
    memory: TrainMemory
    peak_label: str
    efficiency: float
    efficiency_source: str
    images_per_s: float | None
    memory_capacity_bytes: float | None
    memory_source: str
    fits: bool | None
    binds: NotRequired[str]
    gflops: NotRequired[float]
    images_per_s_per_kusd: NotRequired[float | None]
    images_per_j_tdp: NotRequired[float | None]
    rank: NotRequired[int]
    reason: NotRequired[str]


class Check(TypedDict):
    """One measured row against its estimate (`validation`): memory and images/s, each with its error."""

    row: CnnRow
    memory_what: str
    memory_measured: int | None
    memory_estimate: int | None
    memory_error: float | None
    ips_estimate: float | None
    ips_error: float | None
    efficiency: float | None


def parse_workload(text: str) -> tuple[str, str]:
    """'cnn:alexnet' -> ('cnn', 'alexnet'); ValueError with the choices otherwise."""
    family, _, model = text.partition(":")
    if family not in FAMILIES or model not in MODELS:
        raise ValueError(f"--workload must be FAMILY:MODEL with FAMILY in {', '.join(FAMILIES)} and MODEL in "
                         f"{', '.join(sorted(MODELS))}, not {text!r}")
    return family, model


def device_ceilings(dev: Device, precision: str) -> tuple[float | None, str, float | None]:
    """(FLOP/s, which peak, bytes/s) from the catalog: FP32, or FP16/BF16 for amp (FP32 where none)."""
    fp32, fp16 = dev.value("peak_fp32_tflops"), dev.value("peak_fp16_tflops")
    bw = dev.value("memory_bw_gbs")
    if precision == "amp" and fp16 is not None:
        return fp16 * 1e12, "FP16/BF16", bw * 1e9 if bw else None
    return (fp32 * 1e12 if fp32 is not None else None), "FP32", bw * 1e9 if bw else None


def roofline_step_s(flops: float, traffic_bytes: float, peak_flops: float, bw: float | None) -> tuple[float, str]:
    """(seconds, what binds) of one step at 100% of the roofline."""
    compute = flops / peak_flops
    if not bw:
        return compute, "compute (bandwidth unknown)"
    memory = traffic_bytes / bw
    return (compute, "compute") if compute >= memory else (memory, "memory")


def _where(kind: str) -> str:
    return "host" if kind == "cpu" else "device"


def _efficiency_of(row: CnnRow) -> float | None:
    """The fraction of its own roofline a measured row reached (its environment's peaks, of the cores its
    threads used)."""
    peaks = row["peaks"]
    peak = peaks.get("fp32_flops_per_s") if row["precision"] == "fp32" else (
        peaks.get("fp16_flops_per_s") or peaks.get("bf16_flops_per_s") or peaks.get("fp32_flops_per_s"))
    if not peak:
        return None
    peak *= row.get("compute_share", 1.0)
    spec = get_spec(row["model"])
    flops = train_flops(spec, row["batch"], row["image_size"])
    traffic = train_traffic_bytes(spec, row["batch"], row["image_size"], precision=row["precision"])
    step_s, _ = roofline_step_s(flops, traffic, peak, row.get("bw_bytes_per_s") or peaks.get("mem_bw_bytes_per_s"))
    return row["images_per_s"] / (row["batch"] / step_s)


def calibration(rows: list[CnnRow], req: Request, kind: str) -> tuple[float, str]:
    """(efficiency, where it came from) for a device of `kind`."""
    if req.efficiency is not None:
        return req.efficiency, "given (--efficiency)"
    if req.costs is not None:
        return DEFAULT_EFFICIENCY, "default (stored results calibrate the CNNs only; see DEFAULT_EFFICIENCY)"
    assert req.image_size is not None  # a CNN's request
    image_size = req.image_size
    same = [r for r in rows if r["model"] == req.model and r["precision"] == req.precision
            and (r["kind"] == "cpu") == (kind == "cpu")]
    groups: dict[tuple[str, str], list[CnnRow]] = {}
    for r in same:
        groups.setdefault((r["device"], r["framework"]), []).append(r)
    best: tuple[float, str] | None = None
    for (_dev, framework), rs in groups.items():
        eff = interpolated_efficiency(rs, req.batch, req.image_size)
        if eff and (best is None or eff > best[0]):
            size = min({r["image_size"] for r in rs}, key=lambda s: (abs(math.log(s / image_size)), -s))
            used = [r for r in rs if r["image_size"] == size]
            batches = sorted({r["batch"] for r in used})
            how = ("interpolated" if batches[0] <= req.batch <= batches[-1] else
                   f"taken from batch {batches[0] if req.batch < batches[0] else batches[-1]}")
            best = (eff, f"measured: {rs[0]['device_name']} {framework}, batches {batches[0]}-{batches[-1]} at "
                         f"{size} px, {how} to batch {req.batch}")
    if best is not None:
        return best
    return DEFAULT_EFFICIENCY, "default (nothing of this kind measured; see DEFAULT_EFFICIENCY)"


HOST_RAM = "this machine's RAM"


def memory_here(here: Device | None) -> dict[str, float]:
    """Device id -> bytes of memory this machine gives it: the host's RAM (psutil) for this machine's CPU,
    i.e. `here` (the CPU as this machine sees it), or where that is None the catalog entry that describes
    this machine whole. A catalog CPU elsewhere has no RAM of its own to check against."""
    import psutil

    from dlperf.hardware import probe
    from dlperf.hardware.catalog import match

    ram = float(psutil.virtual_memory().total)
    if here is not None:
        return {here.id: ram}
    entry = match(probe.cpu_model())
    return {entry.id: ram} if entry is not None and entry.kind == "cpu" else {}


def memory_capacity(dev: Device, here: Mapping[str, float]) -> tuple[float | None, str]:
    """(bytes, where the figure comes from) of the memory a training step on `dev` must fit in, or (None, why
    it cannot be checked). This machine's RAM for its own CPU (`here`), else the catalog's memory size."""
    if dev.id in here:
        return here[dev.id], HOST_RAM
    gb = dev.value("memory_gb")
    if gb is not None:
        return gb * 1e9, "catalog"
    if dev.kind == "cpu":
        return None, "a CPU's memory is its host's RAM, which the catalog does not give"
    return None, "the catalog has no memory size for it"


def estimate(dev: Device, req: Request, eff: float, eff_source: str,
             here: Mapping[str, float] | None = None) -> Estimate:
    """The estimate for one device: memory need and fit, images/s, GFLOP/s, per dollar and per watt.
    `here`: the memory this machine gives its own devices (`memory_here`)."""
    flops: float | None
    if req.costs is not None:
        mem = req.costs.memory(_where(dev.kind))
        flops, traffic = req.costs.flops, float(req.costs.traffic_bytes())
    else:
        spec = get_spec(req.model)
        mem = train_memory(spec, req.batch, req.image_size, precision=req.precision, where=_where(dev.kind))
        flops = train_flops(spec, req.batch, req.image_size)
        traffic = train_traffic_bytes(spec, req.batch, req.image_size, precision=req.precision)
    peak, which, bw = device_ceilings(dev, req.precision)
    cap, cap_source = memory_capacity(dev, here or {})
    out: Estimate = {"device": dev, "memory_bytes": mem.total_bytes, "memory": mem, "peak_label": which,
                           "efficiency": eff, "efficiency_source": eff_source, "images_per_s": None,
                           "memory_capacity_bytes": cap, "memory_source": cap_source,
                           "fits": None if cap is None else mem.total_bytes <= cap}
    if peak is None or flops is None:
        return out
    step_s, binds = roofline_step_s(flops, traffic, peak, bw)
    ips = req.batch / (step_s / eff)
    price, tdp = dev.value("launch_price_usd"), dev.value("tdp_w")
    out.update({"images_per_s": ips, "binds": binds, "gflops": flops / (step_s / eff) / 1e9,
                "images_per_s_per_kusd": 1e3 * ips / price if price else None,
                "images_per_j_tdp": ips / tdp if tdp else None})
    return out


def exclusion(est: Estimate, req: Request) -> str | None:
    """Why a device is left out of the ranking, or None."""
    dev: Device = est["device"]
    if est["images_per_s"] is None:
        if req.costs is not None and req.costs.flops is None:
            return f"FLOPs {req.costs.flops_note}"
        return f"no {est['peak_label']} peak in the catalog"
    if est["fits"] is False:
        return f"needs {est['memory_bytes'] / 1e9:,.2f} GB > {_capacity_text(est)}"
    if est["fits"] is None:
        return f"{CANNOT_CHECK_MEMORY}: needs {est['memory_bytes'] / 1e9:,.2f} GB; {est['memory_source']}"
    price, tdp = dev.value("launch_price_usd"), dev.value("tdp_w")
    if req.budget_usd is not None:
        if price is None:
            return "price unknown (cannot check the budget)"
        if price > req.budget_usd:
            return f"${price:,.0f} > budget ${req.budget_usd:,.0f}"
    if req.max_power_w is not None:
        if tdp is None:
            return "TDP unknown (cannot check the power limit)"
        if tdp > req.max_power_w:
            return f"TDP {tdp:g} W > {req.max_power_w:g} W"
    if req.target_ips is not None and est["images_per_s"] < req.target_ips:
        return f"est. {est['images_per_s']:,.1f} {req.rate_unit} < target {req.target_ips:,.1f}"
    return None


#: How a device whose memory is unknown is left out (never "qualifies" unchecked).
CANNOT_CHECK_MEMORY = "cannot check memory"


def _capacity_text(est: Estimate) -> str:
    """The memory a device has, as the tables print it: `8 GB`, or `23.5 GB (this machine's RAM)`."""
    capacity = est["memory_capacity_bytes"]
    assert capacity is not None  # called only where the fit was checked (`fits` True or False)
    text = f"{capacity / 1e9:,.4g} GB"
    return text + (f" ({HOST_RAM})" if est["memory_source"] == HOST_RAM else "")


RANK_KEYS = {
    "throughput": (lambda e: -e["images_per_s"], "most images/s"),
    "price": (lambda e: e["device"].value("launch_price_usd") or math.inf, "lowest launch price"),
    "per-dollar": (lambda e: -(e["images_per_s_per_kusd"] or 0.0), "most images/s per $1,000"),
    "per-watt": (lambda e: -(e["images_per_j_tdp"] or 0.0), "most images/s per TDP watt"),
}


def rank(devices: list[Device], rows: list[CnnRow], req: Request, rank_by: str | None = None,
         here: Mapping[str, float] | None = None) -> tuple[list[Estimate], list[tuple[Estimate, str]], str]:
    """(ranked estimates, excluded (estimate, why), rank key). With a target, cheapest first by default.
    `here`: the memory this machine gives its own devices (`memory_here`); every other device is checked
    against the catalog's memory, and one without it is excluded as `CANNOT_CHECK_MEMORY`."""
    key_name = rank_by or ("price" if req.target_ips is not None else "throughput")
    ranked: list[Estimate] = []
    excluded: list[tuple[Estimate, str]] = []
    # Calibration depends only on whether the device is a CPU: once for each.
    calibrated = {is_cpu: calibration(rows, req, "cpu" if is_cpu else "gpu") for is_cpu in (True, False)}
    for dev in devices:
        est = estimate(dev, req, *calibrated[dev.kind == "cpu"], here=here)
        why = exclusion(est, req)
        if why:
            excluded.append((est, why))
        else:
            ranked.append(est)
    key, _label = RANK_KEYS[key_name]
    ranked.sort(key=key)
    for i, est in enumerate(ranked, 1):
        est["rank"] = i
        est["reason"] = _reason(est, req, key_name)
    return ranked, excluded, key_name


def _reason(est: Estimate, req: Request, key_name: str) -> str:
    """Why this rank: the ranked figure first, then each constraint it met."""
    dev: Device = est["device"]
    price, tdp = dev.value("launch_price_usd"), dev.value("tdp_w")
    kusd, per_w = est["images_per_s_per_kusd"], est["images_per_j_tdp"]
    unit = req.rate_unit
    first = {"throughput": f"est. {est['images_per_s']:,.0f} {unit}",
             "price": f"${price:,.0f}" if price else "price unknown",
             "per-dollar": f"est. {kusd:,.1f} {unit} per $1k" if kusd else "price unknown",
             "per-watt": f"est. {per_w:,.2f} {unit} per W" if per_w else "TDP unknown"}[key_name]
    parts = [first]
    if est["fits"] is True:
        parts.append(f"fits {est['memory_bytes'] / 1e9:,.2f} of {_capacity_text(est)}")
    if req.budget_usd is not None:
        parts.append(f"${price:,.0f} <= ${req.budget_usd:,.0f}")
    if req.max_power_w is not None:
        parts.append(f"{tdp:g} W <= {req.max_power_w:g} W")
    if req.target_ips is not None:
        parts.append(f">= {req.target_ips:g} {unit}")
    parts.append(f"bound by {est['binds']}")
    return "; ".join(parts)


def interpolated_efficiency(rows: list[CnnRow], batch: int, image_size: int) -> float | None:
    """The efficiency at `batch`, interpolated in log(batch) between the measured batches either side
    at the measured image size nearest to `image_size`; the nearest batch beyond the measured range."""
    if not rows:
        return None
    size = min({r["image_size"] for r in rows}, key=lambda s: (abs(math.log(s / image_size)), -s))
    same = [r for r in rows if r["image_size"] == size]
    points = sorted((r["batch"], e) for r in same if (e := _efficiency_of(r)))
    if not points:
        return None
    below = [p for p in points if p[0] <= batch]
    above = [p for p in points if p[0] >= batch]
    if not below or not above:
        return (above[0] if not below else below[-1])[1]
    (b0, e0), (b1, e1) = below[-1], above[0]
    if b0 == b1:
        return e0
    t = math.log(batch / b0) / math.log(b1 / b0)
    return e0 + t * (e1 - e0)


def validation(rows: list[CnnRow], model: str) -> list[Check]:
    """Every measured result of `model` against the estimate for it.

    Memory: on a CPU, the host estimate plus the framework's own footprint measured before the
    workload was built (`baseline_rss_bytes`) against the peak RSS; on a GPU, the device estimate
    against the allocator's peak. Images/s: the roofline for that device scaled by the efficiency
    interpolated from the *other* batches measured on that device and framework (leave one out).
    """
    out: list[Check] = []
    for r in (r for r in rows if r["model"] == model):
        spec = get_spec(model)
        mem = train_memory(spec, r["batch"], r["image_size"], precision=r["precision"], where=_where(r["kind"]))
        if r["kind"] == "cpu":
            measured, base = r.get("peak_rss_bytes"), r.get("baseline_rss_bytes")
            est_mem = mem.total_bytes + base if base is not None else None
            what = "peak RSS (estimate + framework baseline)"
        else:
            measured, est_mem, what = r.get("peak_device_mem_bytes"), mem.total_bytes, "allocator peak"
        others = [o for o in rows if o is not r and (o["device"], o["framework"], o["model"], o["precision"]) ==
                  (r["device"], r["framework"], r["model"], r["precision"])]
        eff = interpolated_efficiency(others, r["batch"], r["image_size"])
        own = _efficiency_of(r)
        est_ips = r["images_per_s"] / own * eff if eff and own else None
        out.append({"row": r, "memory_what": what, "memory_measured": measured, "memory_estimate": est_mem,
                    "memory_error": (est_mem - measured) / measured if measured and est_mem else None,
                    "ips_estimate": est_ips,
                    "ips_error": (est_ips - r["images_per_s"]) / r["images_per_s"] if est_ips else None,
                    "efficiency": own})
    return out
