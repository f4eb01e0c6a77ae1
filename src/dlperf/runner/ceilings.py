"""The ceilings a run is judged against, measured at its start and stored with it (`runs.derived["ceilings"]`).

A cache-aware roofline measured as the Empirical Roofline Toolkit does: bandwidth as a curve over
working-set sizes (`hardware.bwcurve.sweep_sizes`: one per octave from inside L1 to DRAM_LLC_FACTOR
times the last level's capacity), at each the run's own frameworks' copy and add (and triad in full;
`workloads.peaks.stream`), timed by dlperf's timer in a fresh worker with the run's thread count. A
point is the best figure over kernels and frameworks, kept with its kernel, framework, working set and
spread; every figure measured is kept beside it. The memory levels are found in the curve
(`bwcurve.find_plateaus`), with where each starts and ends, and stored as the run's levels. Plus the
achieved GEMM FLOP/s (n x n float32 matmul).

Each figure is bytes / the fastest sample's per-call time ("best rate", as STREAM reports it): a
ceiling is what the machine can do, and the fastest sample is the least disturbed by other work; the
median rate and the IQR/median (the spread) are kept beside it. A figure that cannot be measured is
absent with its reason under "errors"; nothing is estimated.

Stored runs before version 2 have one figure per level (at half its capacity) and no curve; the
roofline reads both.

`measure_run_ceilings` is what the sweep calls (parent side); `measure_in_worker` is the worker's
handler of a `CeilingsJob`.
"""

from __future__ import annotations

import gc
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dlperf.core.jobs import CeilingsJob
from dlperf.errors import exception_line
from dlperf.meters.activity import Monitor
from dlperf.runner.ceilings_record import (
    CeilingLevel,
    Ceilings,
    CurvePoint,
    DeviceCeilings,
    FigureTiming,
    GemmFigure,
    StreamFigure,
)
from dlperf.runner.process import run_worker
from dlperf.runner.worker_result import WorkerResult

if TYPE_CHECKING:
    from dlperf.timing import Measurement

#: Workloads whose runs measure their ceilings at the start.
CEILING_WORKLOADS = ("ops", "peaks")
#: Frameworks whose kernels measure the ceilings, where the run uses them (numpy where it uses neither).
CEILING_FRAMEWORKS = ("torch", "numpy")
#: Kernels per variant (full, quick): quick leaves out triad (the ops study has no triad).
STREAM = {False: ("copy", "add", "triad"), True: ("copy", "add")}
#: DRAM working set: this many times the last level's capacity (at least DRAM_MIN_BYTES).
DRAM_LLC_FACTOR = 4
DRAM_MIN_BYTES = 64 * 2**20
#: With no cache sizes known: a DRAM working set large enough to leave any cache.
DRAM_UNKNOWN_BYTES = 512 * 2**20
GEMM_N = {False: 1024, True: 512}
#: Timer settings per kernel and working set of the curve (full, quick): a few seconds in all.
TIMING: dict[bool, FigureTiming] = {
    False: {"warmup": 2, "min_run_time_s": 0.02, "max_time_s": 0.06, "min_samples": 5},
    True: {"warmup": 1, "min_run_time_s": 0.01, "max_time_s": 0.03, "min_samples": 5}}
#: The GEMM's timer settings (full, quick).
GEMM_TIMING: dict[bool, FigureTiming] = {
    False: {"warmup": 2, "min_run_time_s": 0.04, "max_time_s": 0.1, "min_samples": 5},
    True: {"warmup": 1, "min_run_time_s": 0.02, "max_time_s": 0.05, "min_samples": 5}}
TIMEOUT_S = 300.0
#: 1: one figure per level at half its capacity; 2: the bandwidth curve and the plateaus found in it.
CEILINGS_VERSION = 2


def measure_run_ceilings(frameworks: list[str], devices: list[str], threads: int, *,
                         quick: bool = False) -> Ceilings:
    """The run's ceilings, per device, measured in a fresh worker; on failure, the reason (never a guess)."""
    job = CeilingsJob(frameworks=sorted(set(frameworks)), devices=sorted(set(devices)), threads=threads, quick=quick)
    outcome = run_worker(job, timeout_s=TIMEOUT_S, threads=threads)
    if outcome.result.get("status") == "ok":
        return {**outcome.result["ceilings"], "wall_s": round(outcome.wall_s, 3)}
    return {"version": CEILINGS_VERSION, "devices": {},
            "error": f"ceilings not measured: {outcome.result.get('reason') or outcome.result.get('status')}"}


# -- in the worker -------------------------------------------------------------------------------


def measure_in_worker(job: CeilingsJob) -> WorkerResult:
    """The worker's handler: every device's ceilings (the result a run stores under derived["ceilings"])."""
    out: Ceilings = {"version": CEILINGS_VERSION, "measured_at": datetime.now(UTC).isoformat(),
                     "threads": job.threads, "quick": job.quick, "devices": {}}
    monitor = Monitor()  # other work during the measurement lowers the ceilings: a case may then pass them
    monitor.start("during", top=True)
    for device in job.devices:
        out["devices"][device] = device_ceilings(device, job.frameworks, job.threads or 1, job.quick)
    monitor.stop("during")
    out["activity"] = monitor.record()
    return {"status": "ok", "ceilings": out}


def _frameworks(device: str, frameworks: list[str], threads: int, errors: dict[str, str]) -> list[tuple[Any, str]]:
    """(adapter, canonical device) of each ceiling framework the run uses that runs on `device`."""
    from dlperf.frameworks import UnsupportedError, get_framework

    names = [f for f in CEILING_FRAMEWORKS if f in frameworks] or ["numpy"]
    out = []
    for name in names:
        fw = get_framework(name)
        try:
            if not fw.available():
                raise UnsupportedError(f"{name} is not installed")
            fw.import_module()
            dev = fw.check_device(device)
            fw.set_threads(threads)
        except Exception as exc:
            errors[name] = exception_line(exc)
            continue
        out.append((fw, dev))
    return out


def _cache_info(device: str, loaded: list[tuple[Any, str]]) -> Any:
    """The CPU's caches (hardware.caches), or a GPU's L2 as torch reports it."""
    from dlperf.hardware.caches import CacheInfo, CacheLevel, cache_info

    if device == "cpu":
        return cache_info()
    for fw, dev in loaded:
        if fw.family == "torch":
            props = fw.import_module().cuda.get_device_properties(dev)
            l2 = int(getattr(props, "L2_cache_size", 0) or 0)
            if l2:
                return CacheInfo((CacheLevel(2, "Unified", l2, 1, 1),),
                                 "torch.cuda.get_device_properties L2_cache_size")
    return CacheInfo((), f"no cache sizes known for {device}: every working set is DRAM")


def dram_bytes(info: Any, threads: int) -> int:
    """The sweep's last working set: DRAM_LLC_FACTOR x the last level's capacity (at least DRAM_MIN_BYTES),
    DRAM_UNKNOWN_BYTES with no cache sizes known."""
    from dlperf.hardware.caches import memory_levels

    caps = [cap for _, cap in memory_levels(info, threads) if cap is not None]
    return max(DRAM_LLC_FACTOR * caps[-1], DRAM_MIN_BYTES) if caps else DRAM_UNKNOWN_BYTES


def _measured(fn: Any, sync: Any, timing: FigureTiming) -> Measurement:
    """One figure's measurement; its rates are the work per call over the best and the median per-call time."""
    from dlperf.timing import measure

    # The collector is paused once for the whole job (device_ceilings): a gc.collect() per figure, as
    # measure() does by default, would cost more than the figure itself.
    return measure(fn, sync=sync, target_rel_ci=0.02, disable_gc=False, **timing)


def _stream_figure(fw: Any, kernel: str, fn: Any, sync: Any, nbytes: float, timing: FigureTiming) -> StreamFigure:
    m = _measured(fn, sync, timing)
    return {"kernel": kernel, "working_set_bytes": int(nbytes), "framework": fw.name,
            "bytes_per_s": nbytes / m.min_s, "bytes_per_s_median": nbytes / m.median_s,
            "iqr_rel": m.iqr_rel, "n_samples": m.n_samples, "block_size": m.block_size}


def _gemm_figure(fw: Any, n: int, fn: Any, sync: Any, flops: float, timing: FigureTiming) -> GemmFigure:
    m = _measured(fn, sync, timing)
    return {"n": n, "framework": fw.name, "flops_per_s": flops / m.min_s, "flops_per_s_median": flops / m.median_s,
            "iqr_rel": m.iqr_rel, "n_samples": m.n_samples, "block_size": m.block_size}


def device_ceilings(device: str, frameworks: list[str], threads: int, quick: bool) -> DeviceCeilings:
    """One device's bandwidth ceiling per memory level and its achieved GEMM FLOP/s (the garbage
    collector paused throughout, as the timer pauses it for one case)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return _device_ceilings(device, frameworks, threads, quick)
    finally:
        if was_enabled:
            gc.enable()


def _device_ceilings(device: str, frameworks: list[str], threads: int, quick: bool) -> DeviceCeilings:
    from dlperf.hardware.bwcurve import BandwidthCurve, find_plateaus, sweep_sizes
    from dlperf.hardware.caches import memory_levels
    from dlperf.units import format_size
    from dlperf.workloads import get_workload
    from dlperf.workloads.peaks.stream import stream_kernels

    t0 = time.perf_counter()
    errors: dict[str, str] = {}
    loaded = _frameworks(device, frameworks, threads, errors)
    info = _cache_info(device, loaded)
    timing = TIMING[quick]
    points: list[CurvePoint] = []
    for ws in sweep_sizes(dram_bytes(info, threads)):
        figures: list[StreamFigure] = []
        n = max(1, ws // (3 * 4))  # three float32 arrays fill the working set
        for fw, dev in loaded:
            try:
                for kernel, (step, nbytes) in stream_kernels(fw, dev, n).items():
                    if kernel not in STREAM[quick]:
                        continue
                    fn, sync = fw.prepare(step, dev)
                    figures.append(_stream_figure(fw, kernel, fn, sync, nbytes, timing))
            except Exception as exc:  # recorded, the other frameworks' figures stand
                errors[f"{fw.name} {format_size(ws)}"] = exception_line(exc)
        if figures:
            best = max(figures, key=lambda f: f["bytes_per_s"])
            points.append({"working_set_bytes": best["working_set_bytes"], "bytes_per_s": best["bytes_per_s"],
                           "bytes_per_s_median": best["bytes_per_s_median"], "spread_rel": best["iqr_rel"],
                           "kernel": best["kernel"], "framework": best["framework"], "figures": figures})
    curve = BandwidthCurve.from_dict({"points": points})
    plateaus = find_plateaus(list(curve.points), memory_levels(info, threads))
    levels: list[CeilingLevel] = [
        {"name": p.name, "capacity_bytes": None if i == len(plateaus) - 1 else p.end_bytes,
         "start_bytes": p.start_bytes, "end_bytes": p.end_bytes, "bytes_per_s": p.bytes_per_s,
         "iqr_rel": p.spread_rel, "n_points": p.n_points} for i, p in enumerate(plateaus)]
    gemms: list[GemmFigure] = []
    peaks = get_workload("peaks")
    for fw, dev in loaded:
        n = GEMM_N[quick]
        params = peaks.parse({"kind": "gemm", "size_mb": 3 * n * n * 4 / 2**20})
        try:
            fn, sync = fw.prepare(peaks.build(fw, dev, params).fn, dev)
            gemms.append(_gemm_figure(fw, n, fn, sync, peaks.cost(params).flops, GEMM_TIMING[quick]))
        except Exception as exc:
            errors[f"{fw.name} gemm"] = exception_line(exc)
    gemm = max(gemms, key=lambda g: g["flops_per_s"]) if gemms else None
    return {"device": device, "threads": threads, "caches": info.to_dict(),
            "frameworks": [fw.name for fw, _ in loaded], "levels": levels,
            "curve": {"points": points, "plateaus": [
                {"name": p.name, "start_bytes": p.start_bytes, "end_bytes": p.end_bytes, "bytes_per_s": p.bytes_per_s,
                 "spread_rel": p.spread_rel, "n_points": p.n_points} for p in plateaus]},
            "gemm": {**gemm, "figures": gemms} if gemm else None, "errors": errors,
            "timing": ("best sample per kernel (STREAM's best rate), best kernel per working set; median and "
                       "IQR/median beside it"),
            "wall_s": round(time.perf_counter() - t0, 3)}
