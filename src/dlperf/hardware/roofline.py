"""Roofline: each case's FLOP/s and bytes/s against the ceiling that binds it.

Ceilings, per device and dtype:
- compute: the theoretical FLOP peak of the environment fingerprint (the study's
  "Efic." is FLOP/s as a % of it);
- memory: the theoretical bandwidth where known, else the best copy/triad
  bandwidth *measured* by `dlperf peaks` on the same host (labelled as such).
attainable(AI) = min(compute, AI x memory); the binding ceiling is the smaller.

Analysis over rows only: the caller reads the store (the environment a run ran in, with its own
derived peaks; the peaks runs and their results) and passes them in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlperf.core.result import CaseResult
from dlperf.hardware.peaks import flop_peak

#: Fingerprint fields that identify a host and its configuration for peaks lookup.
HOST_KEYS = ("cpu_model", "hostname_sha256", "threads", "cpu_physical_cores")


@dataclass(frozen=True)
class Ceilings:
    flop_peak: float | None
    flop_source: str
    bw_peak: float | None
    bw_source: str
    gemm_measured: float | None


def same_host(env_a: dict[str, Any], env_b: dict[str, Any]) -> bool:
    def gpus(env: dict[str, Any]) -> list[Any]:
        return [g.get("name") for g in env.get("gpus") or []]

    return all(env_a.get(k) == env_b.get(k) for k in HOST_KEYS) and gpus(env_a) == gpus(env_b)


#: `peaks` runs as `measured_peaks` reads them: (the run's environment, its result rows), newest first.
PeaksRuns = list[tuple[dict[str, Any], list[CaseResult]]]


def measured_peaks(peaks_runs: PeaksRuns, env: dict[str, Any]) -> tuple[dict[str, dict[str, float]], str | None]:
    """Best measured gemm/copy/triad per device on this host.

    Takes the newest ok result of each (device, framework, kind) over the `peaks`
    runs (newest first) of the same host as `env`, then the best framework per
    device and kind. Returns them and the ids of the runs they came from.
    """
    newest: dict[tuple[str, str, str], float] = {}
    used: list[str] = []
    for run_env, rows in peaks_runs:
        if not same_host(run_env, env):
            continue
        for r in rows:
            key = (r.device, r.framework, r.params["kind"])
            if not r.ok or key in newest:
                continue
            newest[key] = r.m.flops_per_s if key[2] == "gemm" else r.m.bytes_per_s
            if r.run_id not in used:
                used.append(r.run_id)
    best: dict[str, dict[str, float]] = {}
    for (device, _fw, kind), value in newest.items():
        dev = best.setdefault(device, {})
        dev[kind] = max(dev.get(kind, 0.0), value)
    return best, ", ".join(used) or None


def env_gpu(env: dict[str, Any], device: str) -> dict[str, Any]:
    """The stored environment's record of the GPU `cuda:N` names ({} where it has none)."""
    index = int(device.partition(":")[2] or 0)
    return next((g for g in env.get("gpus") or [] if g.get("index") == index), {})


def device_theoretical(env: dict[str, Any], device: str) -> dict[str, Any]:
    if device.startswith("cuda"):
        return env_gpu(env, device).get("peaks_theoretical") or {}
    return env.get("cpu_peaks_theoretical") or {}


def ceilings(env: dict[str, Any], device: str, dtype: str, measured: dict[str, dict[str, float]],
             peaks_run: str | None) -> Ceilings:
    theo = device_theoretical(env, device)
    fp = flop_peak(theo, dtype)
    flop_source = f"theoretical {dtype} peak" if fp else f"no theoretical {dtype} peak for {device}"
    dev_measured = measured.get(device, {})  # keyed by the device as the studies name it
    bw = theo.get("mem_bw_bytes_per_s")
    if bw:
        bw_source = "theoretical bandwidth"
    else:
        bw = max(dev_measured.get("copy", 0.0), dev_measured.get("triad", 0.0)) or None
        bw_source = (f"measured copy/triad bandwidth (peaks run {peaks_run})" if bw
                     else "no bandwidth ceiling: run `dlperf peaks` or set DLPERF_MEM_BW_GBS")
    return Ceilings(fp, flop_source, bw, bw_source, dev_measured.get("gemm"))


def roofline_point(metrics: dict[str, Any], c: Ceilings) -> dict[str, Any]:
    """% of each peak, the roofline's attainable FLOP/s, % of it, and which ceiling binds."""
    flops, nbytes, ai = metrics.get("flops_per_s"), metrics.get("bytes_per_s"), metrics.get("arithmetic_intensity")
    out: dict[str, Any] = {
        "pct_flop_peak": 100 * flops / c.flop_peak if flops is not None and c.flop_peak else None,
        "pct_bw_peak": 100 * nbytes / c.bw_peak if nbytes is not None and c.bw_peak else None,
        "attainable_flops_per_s": None, "pct_attainable": None, "binds": None,
    }
    if ai is not None and c.flop_peak and c.bw_peak:
        memory_roof = ai * c.bw_peak
        out["attainable_flops_per_s"] = min(c.flop_peak, memory_roof)
        out["binds"] = "memory" if memory_roof < c.flop_peak else "compute"
        if flops is not None:
            out["pct_attainable"] = 100 * flops / out["attainable_flops_per_s"]
    return out
