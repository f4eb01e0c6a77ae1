"""The rules that judge a claim, one function per kind of claim, registered by name (`RULES`).

A rule takes the claim and the runs given and returns an `Outcome`. Most rules judge one run at a time
(`per_run`): the first run, in the order given, whose figures decide the claim is used; where none can,
the verdict is `cannot check here` with what each run lacks. A rule never skips a claim.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from dlperf.analysis.picking import CannotCheck, Trail, on_device, pick, times
from dlperf.claims.claim import Claim
from dlperf.claims.rule_base import RULES, fmt_x, judge_band, per_run
from dlperf.core.result import CaseResult
from dlperf.report.ops_report import ops_points
from dlperf.report.study import ReportData
from dlperf.report.verdict import DOES_NOT_HOLD, HOLDS


# --- study 000 (mlp) ---------------------------------------------------------------------------------------
def _mlp_match(variant: str, size: str | None = None) -> Callable[[dict], bool]:
    def match(p: dict) -> bool:
        return (p.get("variant") == variant and (size is None or p.get("size") == size)
                and p.get("dtype", "float32") == "float32")
    return match


@per_run("mlp_speedup")
def mlp_speedup(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    p = claim.params
    what = f"{p['framework']} {p['variant']} {p['size']}"
    kw = {"workload": "mlp", "framework": p["framework"], "match": _mlp_match(p["variant"], p["size"])}
    gpu = pick(data.results, data.run.id, trail, f"{what} on cuda", device="cuda", **kw)
    cpu = pick(data.results, data.run.id, trail, f"{what} on cpu", device="cpu", **kw)
    t_cpu, t_gpu = times(cpu), times(gpu)
    ratio = t_cpu / t_gpu
    verdict, detail = judge_band(claim, ratio, float(p["value"]), float(p["factor"]))
    return verdict, fmt_x(ratio), f"{detail} (CPU {t_cpu:.4g} s, GPU {t_gpu:.4g} s per iteration)"


def _energy_per_call(results: list[CaseResult], device: str) -> float:
    """Median energy per call of the cases that measured it; CannotCheck with the meter's reason otherwise."""
    got = [r.m.energy["energy_per_call_j"] for r in results if (r.m.energy or {}).get("measured")]
    if not got:
        why = next((r.m.energy.get("reason") for r in results if r.m.energy), None) or "energy not recorded"
        where = "the CPU" if device == "cpu" else "the GPU"
        raise CannotCheck(f"no energy meter on {where}: {why}")
    got.sort()
    return got[len(got) // 2] if len(got) % 2 else (got[len(got) // 2 - 1] + got[len(got) // 2]) / 2


@per_run("mlp_edp")
def mlp_edp(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    p = claim.params
    fw, floor = p["framework"], float(p["min_ratio"])
    worst: dict[str, tuple[float, str]] = {}
    missing: dict[str, list[str]] = {}  # reason -> the programs it stops
    for variant in p["variants"]:
        try:
            kw = {"workload": "mlp", "framework": fw, "match": _mlp_match(variant)}
            gpu = pick(data.results, data.run.id, trail, f"{fw} {variant} on cuda", device="cuda", **kw)
            cpu = pick(data.results, data.run.id, trail, f"{fw} {variant} on cpu", device="cpu", **kw)
            sizes = sorted({r.params["size"] for r in gpu} & {r.params["size"] for r in cpu})
            if not sizes:
                raise CannotCheck(f"{fw} {variant}: no size ran on both the CPU and the GPU")
            for size in sizes:
                c = [r for r in cpu if r.params["size"] == size]
                g = [r for r in gpu if r.params["size"] == size]
                iters = int(c[0].params.get("iterations", 1))
                edp = {dev: _energy_per_call(rs, dev) * iters * times(rs) * iters  # EDP per run, J s
                       for dev, rs in (("cuda", g), ("cpu", c))}
                ratio = edp["cpu"] / edp["cuda"]
                if variant not in worst or ratio < worst[variant][0]:
                    worst[variant] = (ratio, size)
        except CannotCheck as exc:
            missing.setdefault(str(exc), []).append(variant)
    unchecked = "; ".join(f"{', '.join(vs)}: {why}" for why, vs in missing.items())
    shown = ", ".join(f"{v} {fmt_x(r)} ({s})" for v, (r, s) in worst.items())
    failed = {v: rs for v, rs in worst.items() if rs[0] < floor}
    if failed:
        what = ", ".join(f"{v} only {fmt_x(r)} at size {s}" for v, (r, s) in failed.items())
        extra = f"; not checked: {unchecked}" if missing else ""
        return DOES_NOT_HOLD, shown, f"CPU EDP / GPU EDP below {floor:g}x: {what}{extra}; tolerance: {claim.tolerance}"
    if missing:
        held = f"holds for {shown}; " if worst else ""
        raise CannotCheck(held + unchecked)
    return HOLDS, shown, (f"lowest CPU/GPU EDP ratio per program: {shown}; tolerance: {claim.tolerance}; GPU energy "
                          "from the GPU's meter alone (NVML does not count the host CPU), the paper metered the board")


# --- study 003 (backends) ----------------------------------------------------------------------------------
def _backend_device(framework: str) -> str:
    return "cuda" if framework.startswith("nn-cuda") else "cpu"


@per_run("backends_ratio")
def backends_ratio(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    p = claim.params
    model, num, den = p["model"], p["numerator"], p["denominator"]
    got: dict[str, list[CaseResult]] = {}
    for fw in sorted((num, den), key=lambda f: _backend_device(f) != "cuda"):  # a missing GPU is said first
        got[fw] = pick(data.results, data.run.id, trail, f"{fw} ({model})", workload="backends",
                       framework=fw, device=_backend_device(fw), match=lambda q: q.get("model") == model)
    t_num, t_den = times(got[num]), times(got[den])
    ratio = t_num / t_den
    verdict, detail = judge_band(claim, ratio, float(p["value"]), float(p["factor"]))
    return verdict, fmt_x(ratio), f"{detail} ({num} {t_num:.4g} s, {den} {t_den:.4g} s per step)"


# --- study 002 (ops) ---------------------------------------------------------------------------------------
Point = tuple[str, str, float, float]  # framework, op, size MB, % of the FP32 peak
ABOVE_PEAK = ("above the FP32 compute peak: the peak or the precision is wrong, e.g. TF32 matmul on Ampere or "
              "later")


def _efficiencies(data: ReportData, trail: Trail, ops: list[str], device: str,
                  dtype: str) -> tuple[list[Point], list[Point]]:
    """The usable cases placed against the FP32 peak, and those above it (a wrong peak or precision)."""
    cases = pick(data.results, data.run.id, trail, f"{dtype} {'/'.join(ops)}", workload="ops", framework=None,
                 device=device, match=lambda q: q.get("op") in ops and q.get("dtype", "float32") == dtype)
    usable = {id(r.metrics) for r in cases}
    out, above = [], []
    for pt in ops_points(data):
        if id(pt.metrics) not in usable:
            continue
        pct = pt.roof.get("pct_flop_peak")
        if pct is None and pt.metrics.flops_per_s is None:
            raise CannotCheck(f"{pt.framework} {pt.op} {pt.size_mb:g} MB stored no FLOP count (its cost model)")
        if pct is None:
            raise CannotCheck(f"the {device} FP32 peak is unknown ({pt.ceilings.origin}); set it with a DLPERF_* "
                              "override before the run")
        (above if pt.roof.get("flag") == "above compute peak" else out).append(
            (pt.framework, pt.op, pt.size_mb, pct))
    return out, above


def _above(points: list[Point]) -> str:
    """'torch dot 5 MB 140%, ...' (three at most)."""
    return ", ".join(f"{f} {o} {s:g} MB {pct:.0f}%" for f, o, s, pct in points[:3]) + (
        ", ..." if len(points) > 3 else "")


def _missing_ops(data: ReportData, pts: list[Point], ops: list[str], device: str, dtype: str) -> str:
    """'' when every op has a usable case below the peak; else what each op without one lacks."""
    placed = {x[1] for x in pts}
    none_at_all, other = [], []
    for o in ops:
        if o in placed:
            continue
        try:
            pick(data.results, data.run.id, Trail(), f"{dtype} {o}", workload="ops", framework=None,
                 device=device, match=lambda q, o=o: q.get("op") == o and q.get("dtype", "float32") == dtype)
        except CannotCheck as exc:
            if not any(r.params.get("op") == o and r.params.get("dtype", "float32") == dtype and on_device(r, device)
                       for r in data.of("ops")):
                none_at_all.append(o)
            else:
                other.append(f"{o}: {exc}")
            continue
        other.append(f"{o}: every case {ABOVE_PEAK}")
    if none_at_all:
        other.insert(0, f"{', '.join(none_at_all)}: no {dtype} case on {device} in run {data.run.id}")
    return "; ".join(other)


@per_run("ops_efficiency_max")
def ops_efficiency_max(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    p = claim.params
    ops = list(p["ops"])
    pts, above = _efficiencies(data, trail, ops, p["device"], p["dtype"])
    missing = _missing_ops(data, pts, ops, p["device"], p["dtype"])
    if missing:  # a claim on every op is not judged on some of them
        raise CannotCheck(missing)
    cap = float(p["max_pct"])
    lo, hi = min(x[3] for x in pts), max(x[3] for x in pts)
    over = [x for x in pts if x[3] >= cap]
    extra = f"; left out, {ABOVE_PEAK}: {_above(above)}" if above else ""
    if over:
        worst = max(over, key=lambda x: x[3])
        return DOES_NOT_HOLD, f"{lo:.3g}-{hi:.3g}%", (
            f"{len(over)} of {len(pts)} cases at or above {cap:g}%, up to {worst[3]:.3g}% ({worst[0]} {worst[1]} "
            f"{worst[2]:g} MB), {worst[3] / cap:.2g}x the bound; tolerance: {claim.tolerance}{extra}")
    return HOLDS, f"{lo:.3g}-{hi:.3g}%", (f"all {len(pts)} cases of {', '.join(ops)} below {cap:g}%; "
                                         f"tolerance: {claim.tolerance}{extra}")


@per_run("ops_efficiency_band")
def ops_efficiency_band(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    p = claim.params
    pts, above = _efficiencies(data, trail, [p["op"]], p["device"], p["dtype"])
    low, high = float(p["low_pct"]), float(p["high_pct"])
    bad = sorted({x[0] for x in above})  # a framework with any point above the peak is not judged at all
    by_fw: dict[str, list[float]] = {}
    for fw, _, _, pct in pts:
        if fw not in bad:
            by_fw.setdefault(fw, []).append(pct)
    unjudged = f"{', '.join(bad)}: {ABOVE_PEAK} ({_above(above)})" if bad else ""
    if not by_fw:
        raise CannotCheck(unjudged or f"no {p['op']} case could be placed against the peak")
    medians = {fw: statistics.median(v) for fw, v in sorted(by_fw.items())}
    shown = ", ".join(f"{fw} {m:.3g}%" for fw, m in medians.items())
    extra = f"; cannot check {unjudged}" if bad else ""
    out = {fw: m for fw, m in medians.items() if not low <= m <= high}
    if out:
        how = ", ".join(f"{fw} {m:.3g}% ({low - m:.3g} points below {low:g}%)" if m < low else
                        f"{fw} {m:.3g}% (above {high:g}%)" for fw, m in out.items())
        return DOES_NOT_HOLD, shown, f"median over sizes outside the band: {how}; tolerance: {claim.tolerance}{extra}"
    return HOLDS, shown, f"median over sizes per framework: {shown}; tolerance: {claim.tolerance}{extra}"


from dlperf.claims import rules_cnn as _rules_cnn  # noqa: E402,F401  (registers the cnn and catalog rules)

__all__ = ["RULES"]  # every rule, this module's and rules_cnn's (imported above), registered
