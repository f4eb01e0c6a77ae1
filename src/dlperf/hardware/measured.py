"""Measured efficiency of CNN training per device, from stored results (study 004's question, answered
with this user's own measurements rather than datasheets).

Per stored `cnn` result: images/s; "real GFLOP/s" (study 004's metric: the cost model's training FLOPs
divided by the measured time); % of the device's theoretical FP32 peak; images per joule (images/s
per watt) and images/s per dollar. Power is the energy meter's measured mean when the case measured
energy; otherwise the device's TDP, labelled "TDP (not measured)"; otherwise empty with the reason.
A price is the catalog's launch price, or the user's, labelled as such.

Analysis over rows only: the caller reads the results, the environment each run ran in and the
`peaks` runs from the store and passes them in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.hardware.catalog import Device, match
from dlperf.hardware.catalog_peaks import DevicePeaks, PeakKey
from dlperf.hardware.roofline import PeaksRuns, cpu_share, device_theoretical, env_gpu, measured_peaks
from dlperf.models import get_spec


@dataclass(frozen=True)
class MeasuredDevice:
    """A device as one stored environment saw it, with its catalog entry where there is one."""

    key: str  # catalog id, or "<name> (not in catalog)"
    name: str
    kind: str  # "cpu" | "gpu"
    entry: Device | None
    peaks: DevicePeaks  # the environment's theoretical peaks (catalog-read where matched)
    share: float = 1.0  # the fraction of a catalog CPU package the environment saw (a VM's cores)


class CnnRow(TypedDict):
    """One measured CNN training setup (`cnn_rows`): the device as its environment saw it, the case, and its
    images/s, GFLOP/s, % of peak, power and price, each with where it came from."""

    device: str  # `MeasuredDevice.key`
    device_name: str
    kind: str  # "cpu" | "gpu"
    entry: Device | None
    peaks: DevicePeaks
    compute_share: float  # the share of the peaks' cores the case's threads used (1.0: all, unknown, or a GPU)
    share: float
    framework: str
    model: str
    image_size: int
    batch: int
    precision: str
    images_per_s: float
    real_gflops: float | None
    pct_of_peak: float | None
    peak_source: str
    bw_bytes_per_s: float | None
    bw_source: str
    power_w: float | None
    power_source: str
    images_per_j: float | None
    price_usd: float | None
    price_source: str
    images_per_s_per_kusd: float | None
    peak_rss_bytes: int | None
    baseline_rss_bytes: int | None
    peak_device_mem_bytes: int | None
    run_id: str
    iqr_rel: float | None


def device_of(device: str, env: Environment) -> MeasuredDevice:
    """The device a result ran on (`cpu`, `cuda`, `cuda:N`) as its environment saw it."""
    peaks = device_theoretical(env, device)
    if device == "cpu":
        name, kind = env.get("cpu_model") or "unknown CPU", "cpu"
    else:
        name, kind = env_gpu(env, device).get("name") or f"unknown GPU ({device})", "gpu"
    entry = match(name)
    if entry is not None and (entry.kind == "cpu") != (kind == "cpu"):
        entry = None
    share = entry.core_share(env.get("cpu_physical_cores")) if entry is not None else 1.0
    key = (entry.id if share == 1.0 else f"{entry.id} ({share:.3g} of it)") if entry else f"{name} (not in catalog)"
    return MeasuredDevice(key, name, kind, entry, peaks, share)


def _share_text(dev: MeasuredDevice) -> str:
    return "" if dev.share == 1.0 else f" x {dev.share:.3g} (the package's cores this machine sees)"


def _power(energy: dict[str, Any] | None, dev: MeasuredDevice, tdp_w: float | None) -> tuple[float | None, str]:
    """(watts, where from): the meter's mean (`energy`: a case's energy metric), else a TDP (catalog's or the
    user's, labelled), else why not."""
    energy = energy or {}
    if energy.get("measured"):
        return float(energy["mean_power_w"]), f"measured ({energy.get('meter', 'meter')})"
    why = energy.get("reason") or "energy not recorded"
    if dev.entry is not None and dev.entry.value("tdp_w"):
        return dev.entry.value("tdp_w") * dev.share, f"TDP from the catalog{_share_text(dev)}, not measured ({why})"
    if tdp_w:
        return tdp_w, f"TDP given by the user, not measured ({why})"
    return None, f"no meter ({why}) and no TDP known (pass --tdp-w)"


def _price(dev: MeasuredDevice, price_usd: float | None) -> tuple[float | None, str]:
    if dev.entry is not None and dev.entry.value("launch_price_usd"):
        return dev.entry.value("launch_price_usd") * dev.share, f"catalog launch price{_share_text(dev)}"
    if price_usd:
        return price_usd, "given by the user (--price-usd)"
    return None, "unknown (not in the catalog, or unknown there; pass --price-usd)"


def cnn_rows(results: list[CaseResult], envs: Mapping[str, Environment], peaks_runs: PeaksRuns, *,
             tdp_w: float | None = None, price_usd: float | None = None) -> list[CnnRow]:
    """One row per ok `cnn` training result (the latest when a case was measured in several runs; an inference
    case, `task: infer`, is not a training step and is left out).

    `results`: stored results, oldest first; `envs`: the environment each of their runs ran in,
    by run id (with the run's own peaks); `peaks_runs`: the `peaks` runs, newest first, for the
    measured bandwidth where no theoretical one is known.
    """
    copy_bw: dict[int, dict[str, dict[str, float]]] = {}
    latest: dict[tuple, CnnRow] = {}
    for r in results:
        if r.workload != "cnn" or not r.ok or r.params.get("task", "train") != "train":  # training efficiency only
            continue
        env = envs[r.run_id]
        if r.env_id not in copy_bw:  # one environment, one host: the same measured peaks
            copy_bw[r.env_id] = measured_peaks(peaks_runs, env)[0]
        dev = device_of(r.device, env)
        bw, bw_source = dev.peaks.get("mem_bw_bytes_per_s"), "theoretical"
        if not bw:
            got = copy_bw[r.env_id].get(r.device, {})
            bw = max(got.get("copy", 0.0), got.get("triad", 0.0)) or None
            bw_source = "measured copy/triad (dlperf peaks)" if bw else "unknown (run `dlperf peaks`)"
        p, m = r.params, r.m
        size = p.get("image_size") or get_spec(p["model"]).image_size
        precision = p.get("precision", "fp32")
        ips = m.get("samples_per_s")
        if not ips:
            continue
        power, power_how = _power(m.energy, dev, tdp_w)
        price, price_how = _price(dev, price_usd)
        energy = m.get("energy") or {}
        per_joule = (m.samples_per_call / energy["energy_per_call_j"]
                     if energy.get("measured") and energy.get("energy_per_call_j") else None)
        key: PeakKey = ("bf16_flops_per_s" if precision == "amp" and dev.kind == "cpu" else
                        "fp16_flops_per_s" if precision == "amp" else "fp32_flops_per_s")
        # The cores the case's own threads used, as the model reports count them (`transformer_report.peak_for`;
        # 1 thread of 2 cores: half the peak); a framework that recorded no thread count is held to the whole CPU.
        fraction, share = cpu_share(1.0, env, r.device, r.m.threads)
        peak = dev.peaks.get(key)
        peak = peak * fraction if peak else peak
        peak_source = ((dev.peaks.get("peaks_source") if dev.entry is not None else None)
                       or dev.peaks.get("assumptions", "unknown"))
        row: CnnRow = {
            "device": dev.key, "device_name": dev.name, "kind": dev.kind, "entry": dev.entry, "peaks": dev.peaks,
            "compute_share": fraction,
            "share": dev.share,
            "framework": r.framework, "model": p["model"], "image_size": size, "batch": int(p["batch"]),
            "precision": precision, "images_per_s": ips, "real_gflops": (m.get("flops_per_s") or 0) / 1e9 or None,
            "pct_of_peak": 100 * m.flops_per_s / peak if peak and m.flops_per_s else None,
            "peak_source": f"{peak_source}; of it, {share}" if share else peak_source,
            "bw_bytes_per_s": bw, "bw_source": bw_source,
            "power_w": power, "power_source": power_how,
            "images_per_j": per_joule if per_joule is not None else (ips / power if power else None),
            "price_usd": price, "price_source": price_how,
            "images_per_s_per_kusd": 1e3 * ips / price if price else None,
            "peak_rss_bytes": m.get("peak_rss_bytes"), "baseline_rss_bytes": m.get("baseline_rss_bytes"),
            "peak_device_mem_bytes": m.get("peak_device_mem_bytes"), "run_id": r.run_id,
            "iqr_rel": m.get("iqr_rel"),
        }
        latest[(dev.key, r.framework, p["model"], size, precision, int(p["batch"]))] = row
    return list(latest.values())


def best_per_setup(rows: list[CnnRow]) -> list[CnnRow]:
    """For each device, framework, model, image size and precision: the batch with the most images/s."""
    best: dict[tuple, CnnRow] = {}
    for r in rows:
        key = (r["device"], r["framework"], r["model"], r["image_size"], r["precision"])
        if key not in best or r["images_per_s"] > best[key]["images_per_s"]:
            best[key] = r
    return sorted(best.values(), key=lambda r: (r["model"], r["image_size"], -r["images_per_s"]))


def nearest(rows: list[CnnRow], batch: int, image_size: int) -> CnnRow | None:
    """The row measured closest to this batch and image size (log distance; image size counts double)."""
    if not rows:
        return None
    return min(rows, key=lambda r: abs(math.log(r["batch"] / batch)) + 2 * abs(math.log(r["image_size"] / image_size)))
