"""Cache-aware roofline: each case's FLOP/s and bytes/s against the ceilings of its own run.

Ceilings, per device (and dtype for compute):
- compute: the theoretical FLOP peak of the run's environment (the study's "Efic." is FLOP/s as a % of
  it), with the measured GEMM FLOP/s beside it;
- memory: the bandwidth curve measured at the start of the run itself and stored with it
  (`runner.ceilings`, `runs.derived["ceilings"]`, `hardware.bwcurve`), each point with its spread
  (IQR/median). A case is judged against the curve at its own working set, the bytes of the arrays it
  touches (`bytes_per_call`), and named after the plateau (memory level as the data shows it) that holds
  it. A run stored before the curve has one figure per level (L1, L2, ..., LLC, DRAM): a case is then
  charged to the smallest level whose capacity (for the run's thread count) holds its working set.
- A run stored before ceilings were measured with runs has no cache sizes: its only memory ceiling is
  DRAM, from the theoretical bandwidth or the best copy/triad of a `dlperf peaks` run of the same host
  that finished before the run started (the caller passes only those), named in the source.
attainable(AI) = min(compute, AI x the level's bandwidth); the binding ceiling is the smaller.
Nothing here reads the clock or the machine: a report of a run is the same whenever it is drawn.

Analysis over rows only: the caller reads the store and passes the run's environment (with its own
derived figures) and the peaks runs in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict, cast

from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.core.validity import assess_activity, short_reason, validity_words
from dlperf.hardware.bwcurve import BandwidthCurve
from dlperf.hardware.caches import DRAM, CacheInfo, level_for, memory_levels
from dlperf.hardware.catalog_peaks import DevicePeaks
from dlperf.hardware.fma_peak import ONE_CORE_SPEEDUP_MIN
from dlperf.hardware.peaks import flop_peak, flop_peak_origin
from dlperf.units import format_size

#: Fingerprint fields that identify a host and its configuration for peaks lookup.
HOST_KEYS = ("cpu_model", "hostname_sha256", "threads", "cpu_physical_cores")
#: A case is "above" a memory ceiling only beyond the ceiling's spread, the case's IQR and this much more.
ABOVE_TOLERANCE_REL = 0.10
#: A memory ceiling whose spread (IQR/median) exceeds this cannot judge a case: the check says so.
CEILING_NOISY_REL = 0.25
#: Validities that are never judged against a ceiling: each is slower or less certain than the machine.
NOT_JUDGED = ("invalid", "contended", "noisy")


@dataclass(frozen=True)
class LevelCeiling:
    """One memory level's bandwidth ceiling."""

    name: str
    #: Bytes the level holds for the run's threads; None for DRAM (holds anything).
    capacity_bytes: int | None
    bytes_per_s: float | None
    #: IQR/median of the measurement behind the figure (None where not measured with the run).
    spread_rel: float | None
    source: str


@dataclass(frozen=True)
class Ceilings:
    flop_peak: float | None
    flop_source: str
    #: Memory levels, fastest first, DRAM last.
    levels: tuple[LevelCeiling, ...]
    gemm_measured: float | None
    #: Where the ceilings come from (measured with the run, or the peaks run they were pinned to).
    origin: str = ""
    #: Whether the run stored its cache sizes (without them every case is charged to DRAM).
    caches_known: bool = False
    dram_theoretical: float | None = None
    dram_theoretical_source: str = ""
    gemm_source: str = ""
    #: The bandwidth curve measured with the run (None for a run stored before curves: one figure per level).
    curve: BandwidthCurve | None = None
    #: (level, capacity for the run's threads) as the machine reports its caches (`caches.memory_levels`).
    reported_levels: tuple[tuple[str, int | None], ...] = ()
    #: Why the memory ceilings were measured on a busy machine (other processes' CPU, steal: as a case is called
    #: `contended`), or None: such ceilings sit below what the machine does, so they cannot flag a case above them.
    busy: str | None = None

    @property
    def bw_peak(self) -> float | None:
        """The DRAM ceiling."""
        return self.dram.bytes_per_s if self.dram else None

    @property
    def dram(self) -> LevelCeiling | None:
        return next((lv for lv in self.levels if lv.name == DRAM), None)

    def level_for(self, working_set_bytes: float | None) -> LevelCeiling | None:
        """The smallest level whose capacity holds the working set (DRAM where none does); None where the
        working set is unknown."""
        if working_set_bytes is None or not self.levels:
            return None
        for lv in self.levels:
            if lv.capacity_bytes is None or working_set_bytes <= lv.capacity_bytes:
                return lv
        return self.levels[-1]


def same_host(env_a: Environment, env_b: Environment) -> bool:
    def gpus(env: Environment) -> list[Any]:
        return [g.get("name") for g in env.get("gpus") or []]

    return all(env_a.get(k) == env_b.get(k) for k in HOST_KEYS) and gpus(env_a) == gpus(env_b)


#: `peaks` runs as `measured_peaks` reads them: (the run's environment, its result rows), newest first.
PeaksRuns = list[tuple[Environment, list[CaseResult]]]


def measured_peaks(peaks_runs: PeaksRuns, env: Environment) -> tuple[dict[str, dict[str, float]], str | None]:
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


def env_gpu(env: Environment, device: str) -> dict[str, Any]:
    """The stored environment's record of the GPU `cuda:N` names ({} where it has none)."""
    index = int(device.partition(":")[2] or 0)
    return next((g for g in env.get("gpus") or [] if g.get("index") == index), {})


def device_theoretical(env: Environment, device: str) -> DevicePeaks:
    """The theoretical peaks the stored environment recorded for `device` ({} where it has none)."""
    stored = (env_gpu(env, device).get("peaks_theoretical") if device.startswith("cuda")
              else env.get("cpu_peaks_theoretical"))
    found = cast("DevicePeaks | None", stored)  # as `hardware.peaks` recorded it in the fingerprint
    return found or {}


def _plateau_levels(dev: dict[str, Any]) -> tuple[LevelCeiling, ...]:
    """The plateaus found in a stored curve as levels, each ending where the data says it ends (the last
    holds anything)."""
    plateaus = BandwidthCurve.from_dict(dev.get("curve") or {}).plateaus
    return tuple(LevelCeiling(p.name, None if i == len(plateaus) - 1 else p.end_bytes, p.bytes_per_s, p.spread_rel,
                              f"plateau {format_size(p.start_bytes)} to {format_size(p.end_bytes)}, {p.n_points} "
                              f"points, IQR up to {100 * p.spread_rel:.1f}%")
                 for i, p in enumerate(plateaus))


def _reported_levels(caches: dict[str, Any], threads: int | None) -> tuple[tuple[str, int | None], ...]:
    """The cache levels the run stored, with their capacity for its threads (() where they cannot be read)."""
    try:
        return tuple(memory_levels(CacheInfo.from_dict(caches), int(threads or 1)))
    except (TypeError, ValueError):
        return ()


def _stored_levels(dev: dict[str, Any]) -> tuple[LevelCeiling, ...]:
    """The stored levels, fastest first. A level closer to the core never has a lower ceiling than one
    further out: where its own figure is lower (seen: L1 87 GB/s under L2's 216, set by each call's
    overhead, not by the cache), the slower level's figure is its ceiling and the source says so."""
    errors = dev.get("errors") or {}
    out = []
    levels = dev.get("levels") or []
    for i, lv in enumerate(levels):
        outer = max((o.get("bytes_per_s") or 0.0 for o in levels[i + 1:]), default=0.0)
        own = lv.get("bytes_per_s")
        if own and outer > own:
            src = next(o for o in levels[i + 1:] if o.get("bytes_per_s") == outer)
            out.append(LevelCeiling(lv["name"], lv.get("capacity_bytes"), outer, src.get("iqr_rel"),
                                    f"{src['name']}'s figure: its own, {own / 1e9:.3g} GB/s ({lv['framework']} "
                                    f"{lv['kernel']} at {format_size(lv['working_set_bytes'])}), is below an outer "
                                    f"level's, which a cache cannot be: per-call overhead bounds it"))
            continue
        if lv.get("bytes_per_s"):
            source = (f"{lv['framework']} {lv['kernel']} at {format_size(lv['working_set_bytes'])}, "
                      f"IQR {100 * (lv.get('iqr_rel') or 0):.1f}%")
        else:
            why = "; ".join(f"{k}: {v}" for k, v in errors.items() if k.endswith(f" {lv['name']}")) or "no figure"
            source = f"not measured ({why})"
        out.append(LevelCeiling(lv["name"], lv.get("capacity_bytes"), lv.get("bytes_per_s"), lv.get("iqr_rel"),
                                source))
    return tuple(out)


def cpu_share(peak: float, env: Environment, device: str, threads: int | None) -> tuple[float, str]:
    """(peak, what share) of a CPU peak that `threads` of its cores compute on: the used cores' share, with
    "the T of C cores the run's threads use"; the whole peak and "" on a GPU, with all cores or no thread count.
    Where one core alone ran the probe's FMA loop faster than each of all of them, each used core counts at that
    rate (at most the whole peak): the share is an upper bound, as a ceiling must be (the compute peak flags any
    case above it); the label says so from `ONE_CORE_SPEEDUP_MIN` (under it: a VM's noise, 1.00-1.01x here)."""
    cores = env.get("cpu_physical_cores")
    if device == "cpu" and cores and threads and threads < cores:
        share = f"the {threads} of {cores} cores the run's threads use"
        speedup = device_theoretical(env, "cpu").get("one_core_fma_speedup")
        rate = max(1.0, speedup) if isinstance(speedup, int | float) else 1.0
        if rate >= ONE_CORE_SPEEDUP_MIN:
            share += f", each at up to {rate:.2f}x the all-core rate (one core alone ran the FMA loop that much faster)"
        return min(peak, peak * threads * rate / cores), share
    return peak, ""


def _busy(stored: dict[str, Any] | None, device: str, threads: int | None) -> str | None:
    """Why the run's CPU ceilings were measured on a busy machine (`core.validity.assess_activity` of the activity
    stored with them), or None (quiet, a GPU's, or stored before it was recorded)."""
    activity = (stored or {}).get("activity")
    if device != "cpu" or not activity:
        return None
    validity, reason = assess_activity(activity, threads=threads, device=device)
    return short_reason(reason) if validity == "contended" else None


def ceilings(env: Environment, device: str, dtype: str, measured: dict[str, dict[str, float]],
             peaks_run: str | None, stored: dict[str, Any] | None = None) -> Ceilings:
    """The ceilings a case of `device` and `dtype` is judged against: those measured with its run
    (`stored`: the run's derived["ceilings"]) where it has them, else the DRAM ceiling of `measured`
    (the peaks runs the caller pinned: same host, finished before the run started)."""
    theo = device_theoretical(env, device)
    fp = flop_peak(theo, dtype)
    flop_source = flop_peak_origin(theo, dtype) if fp else f"no theoretical {dtype} peak for {device}"
    if fp:
        fp, share = cpu_share(fp, env, device, env.get("threads"))
        flop_source += f" of {share}" if share else ""
    theo_bw = theo.get("mem_bw_bytes_per_s")
    theo_bw_source = "theoretical" if theo_bw else "no theoretical bandwidth recorded (DLPERF_MEM_BW_GBS gives one)"
    dev = ((stored or {}).get("devices") or {}).get(device)
    curve = BandwidthCurve.from_dict((dev or {}).get("curve") or {})
    if dev and not curve.points and not any(lv.get("bytes_per_s") for lv in dev.get("levels") or []):
        stored = {"error": "the ceilings stored with this run have no figure for this device "
                           "(their kernels need torch or numpy)"}
        dev = None
    if dev:
        gemm = dev.get("gemm") or {}
        caches = dev.get("caches") or {}
        if curve.points:
            sizes = sorted(p.working_set_bytes for p in curve.points)
            how = (f"a bandwidth curve of {len(sizes)} working sets from {format_size(sizes[0])} to "
                   f"{format_size(sizes[-1])}, best sample per kernel; levels are the plateaus found in it")
        else:
            how = ("best sample per kernel; stored before bandwidth curves: one figure per level, at half its "
                   "capacity")
        busy = _busy(stored, device, dev.get("threads"))
        return Ceilings(
            fp, flop_source, _plateau_levels(dev) if curve.points else _stored_levels(dev), gemm.get("flops_per_s"),
            origin=(f"measured at the start of this run ({dev.get('threads')} threads, {how}; "
                    f"cache sizes: {caches.get('source', 'not recorded')})"
                    + (f"; on a busy machine ({busy}): no case is judged against its memory ceilings" if busy
                       else "")),
            caches_known=bool(caches.get("levels")), dram_theoretical=theo_bw, dram_theoretical_source=theo_bw_source,
            gemm_source=f"{gemm['framework']} matmul n={gemm['n']}, with the run" if gemm else "",
            curve=curve if curve.points else None,
            reported_levels=_reported_levels(caches, dev.get("threads")),
            busy=busy)
    dev_measured = measured.get(device, {})  # keyed by the device as the studies name it
    bw: float | None
    if theo_bw:
        bw, bw_source = theo_bw, "theoretical bandwidth"
    else:
        bw = max(dev_measured.get("copy", 0.0), dev_measured.get("triad", 0.0)) or None
        bw_source = (f"measured copy/triad bandwidth (peaks run {peaks_run})" if bw
                     else "no bandwidth ceiling: run `dlperf peaks` or set DLPERF_MEM_BW_GBS")
    why = (stored or {}).get("error") or "no ceilings stored with this run"
    pinned = (f"from peaks run {peaks_run} (same host, finished before this run began)" if peaks_run
              else "none: no peaks run of this host finished before this run began")
    origin = f"{why}, nor cache sizes: every case is charged to 'DRAM?'; DRAM ceiling {pinned}"
    return Ceilings(fp, flop_source, (LevelCeiling(DRAM, None, bw, None, bw_source),), dev_measured.get("gemm"),
                    origin=origin, dram_theoretical=theo_bw, dram_theoretical_source=theo_bw_source,
                    gemm_source=f"peaks run {peaks_run}" if dev_measured.get("gemm") else "")


def _memory_ceiling(c: Ceilings, level: LevelCeiling | None, working_set: float | None
                    ) -> tuple[float | None, float, float, str]:
    """(bandwidth at the working set, the ceiling's spread, how far the curve may lie above the figure
    between two measured sizes, where it comes from): the curve where the run has one, else its level's."""
    at = c.curve.at(working_set) if c.curve is not None and working_set is not None else None
    if at is not None:
        return at.bytes_per_s, at.spread_rel, at.upper_bytes_per_s / at.bytes_per_s - 1, at.source
    if level is None:
        return None, 0.0, 0.0, ""
    return level.bytes_per_s, level.spread_rel or 0.0, 0.0, f"{level.name}'s figure"


def _short(name: str) -> str:
    return name.split(" (")[0]


def _level_label(c: Ceilings, level: LevelCeiling | None, working_set: float | None) -> str | None:
    """The level a case's working set lives in, "?" after it where the run stored no cache sizes. With a curve:
    the plateau that holds it, "A-B" between plateaus A and B (the slope from one level to the next), else the
    reported cache level whose capacity holds it (no plateau there: the data did not show one). Plateaus by
    their short name ("L1", not "L1 (overhead-bound)": the ceilings lines say that)."""
    if c.curve is not None and working_set is not None:
        plateaus = c.curve.plateaus
        name = level_for(working_set, list(c.reported_levels)) if c.reported_levels else None
        for i, p in enumerate(plateaus):
            if p.start_bytes <= working_set <= p.end_bytes:
                name = _short(p.name)
                break
            if working_set < p.start_bytes:
                name = f"{_short(plateaus[i - 1].name)}-{_short(p.name)}" if i else name
                break
        if name is None:
            return None
    elif level is None:
        return None
    else:
        name = level.name
    return name if c.caches_known else f"{name}?"


class RooflinePoint(TypedDict):
    """Where a case stands against its ceilings (`roofline_point`)."""

    level: str | None
    level_bw: float | None
    ceiling_spread_pct: float
    ceiling_source: str
    pct_flop_peak: float | None
    pct_bw_peak: float | None
    tolerance_pct: float
    attainable_flops_per_s: float | None
    pct_attainable: float | None
    binds: str | None
    flag: str | None
    check: str


def roofline_point(metrics: dict[str, Any], c: Ceilings) -> RooflinePoint:
    """Where a case stands: its memory level (by its working set, `bytes_per_call`), % of the bandwidth
    ceiling at its working set (the run's curve, else its level's figure) and of the compute peak, the
    attainable FLOP/s, % of it, which ceiling binds, a flag and the check.

    flag: "above <level> ceiling" where bytes/s exceed the ceiling by more than the ceiling's spread, the
    case's IQR, how far the curve may rise between the two measured sizes around the case, and
    ABOVE_TOLERANCE_REL: the ceiling or the cost model is wrong; "above compute peak" where FLOP/s exceed
    the compute peak at all (at any validity: contention and noise only slow a case): a bug (peak or cost
    model). A case whose validity is in NOT_JUDGED, whose ceilings were measured on a busy machine (`busy`), or
    whose ceiling's spread is over CEILING_NOISY_REL, is not judged against a memory ceiling; its check says why,
    in the run's own validity words.
    """
    flops, nbytes, ai = metrics.get("flops_per_s"), metrics.get("bytes_per_s"), metrics.get("arithmetic_intensity")
    working_set = metrics.get("bytes_per_call")
    level = c.level_for(working_set)
    bw, ceiling_spread, gap, source = _memory_ceiling(c, level, working_set)
    case_iqr = metrics.get("iqr_rel") or 0.0
    spread = ceiling_spread + case_iqr + gap + ABOVE_TOLERANCE_REL if bw else 0.0
    out: RooflinePoint = {
        "level": _level_label(c, level, working_set),
        "level_bw": bw, "ceiling_spread_pct": 100 * ceiling_spread, "ceiling_source": source,
        "pct_flop_peak": 100 * flops / c.flop_peak if flops is not None and c.flop_peak else None,
        "pct_bw_peak": 100 * nbytes / bw if nbytes is not None and bw else None,
        "tolerance_pct": 100 * spread,
        "attainable_flops_per_s": None, "pct_attainable": None, "binds": None, "flag": None, "check": "ok",
    }
    if ai is not None and c.flop_peak and bw:
        memory_roof = ai * bw
        out["attainable_flops_per_s"] = min(c.flop_peak, memory_roof)
        out["binds"] = "memory" if memory_roof < c.flop_peak else "compute"
        if flops is not None:
            out["pct_attainable"] = 100 * flops / out["attainable_flops_per_s"]
    validity = metrics.get("validity")
    if out["pct_flop_peak"] is not None and out["pct_flop_peak"] > 100:
        out["flag"] = "above compute peak"
    elif validity in NOT_JUDGED:
        out["check"] = f"{validity_words(validity, metrics.get('validity_reason'))}: not judged"
    elif bw and c.busy:
        out["check"] = f"ceilings measured on a busy machine ({c.busy}): not judged"
    elif bw and ceiling_spread > CEILING_NOISY_REL:
        out["check"] = f"ceiling too noisy to judge (IQR {100 * ceiling_spread:.0f}% at {source})"
    elif out["pct_bw_peak"] is not None and out["pct_bw_peak"] > 100 + out["tolerance_pct"]:
        out["flag"] = (f"above {(out['level'] or 'memory').rstrip('?')} ceiling"
                       + ("" if c.caches_known else " (no cache sizes)"))
    out["check"] = out["flag"] or out["check"]
    return out
