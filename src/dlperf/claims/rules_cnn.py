"""The rules of studies 001 and 004: framework against framework on CNN training (time per image, memory),
the datasheet figures against the catalog, and the ranking of devices by training speed."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from dlperf.analysis.picking import CannotCheck, Trail, pick
from dlperf.claims.claim import Claim
from dlperf.claims.rule_base import Outcome, fmt_x, judge_band, not_run, per_run, rule, runs_with
from dlperf.core.result import CaseResult
from dlperf.report.study import ReportData
from dlperf.report.verdict import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS

if TYPE_CHECKING:
    from dlperf.hardware.measured import CnnRow

Point = tuple[str, str, int, str, int]  # device, model, image size, precision, batch


def _point(r: CaseResult) -> Point:
    from dlperf.workloads.cnn import CnnParams

    p = CnnParams.model_validate(r.params)
    return (r.device, p.model, p.size(), p.precision, p.batch)


def _training(params: dict[str, Any]) -> bool:
    return params.get("task", "train") == "train"


def _label(pt: Point) -> str:
    return f"{pt[1]} {pt[0]} {pt[2]}px{'' if pt[3] == 'fp32' else ' ' + pt[3]} batch {pt[4]}"


def _by_point(results: list[CaseResult]) -> dict[Point, list[CaseResult]]:
    out: dict[Point, list[CaseResult]] = {}
    for r in results:
        out.setdefault(_point(r), []).append(r)
    return out


def _pair(claim: Claim, data: ReportData, trail: Trail, device: str) -> tuple[dict[Point, list[CaseResult]], ...]:
    """The usable training cases of the slower and the faster framework on one device, by point (slower first);
    the study's claims are of training steps, so an inference case (`task: infer`) never enters."""
    p = claim.params
    slow = pick(data.results, data.run.id, trail, f"{p['slower']} on {device}", workload="cnn",
                framework=p["slower"], device=device, match=_training)
    fast = pick(data.results, data.run.id, trail, f"{p['faster']} on {device}", workload="cnn",
                framework=p["faster"], device=device, match=_training)
    return _by_point(slow), _by_point(fast)


def _time_ratios(claim: Claim, data: ReportData, trail: Trail) -> dict[Point, float]:
    """Slower / faster framework's time per image (median over repetitions) at every point both ran."""
    slow, fast = _pair(claim, data, trail, claim.params["device"])
    out = {}
    for pt in sorted(slow.keys() & fast.keys()):
        ts = [r.m.time_per_sample_s for r in slow[pt] if r.m.time_per_sample_s]
        tf = [r.m.time_per_sample_s for r in fast[pt] if r.m.time_per_sample_s]
        if ts and tf:
            out[pt] = statistics.median(ts) / statistics.median(tf)
    if not out:
        raise CannotCheck(f"{claim.params['slower']} and {claim.params['faster']} share no (model, image size, "
                          f"precision, batch) on {claim.params['device']} in run {data.run.id}")
    return out


@per_run("cnn_faster")
def cnn_faster(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    ratios = _time_ratios(claim, data, trail)
    fast = claim.params["faster"]
    wins = sum(v > 1 for v in ratios.values())
    lo, hi = min(ratios.values()), max(ratios.values())
    measured = f"{fast} faster at {wins} of {len(ratios)} points ({fmt_x(lo)} to {fmt_x(hi)})"
    best = max(ratios, key=lambda k: ratios[k])
    detail = (f"{claim.params['slower']}/{fast} time per image from {fmt_x(lo)} to {fmt_x(hi)} (largest at "
              f"{_label(best)}); tolerance: {claim.tolerance}")
    if wins * 2 > len(ratios):
        return HOLDS, measured, detail
    return DOES_NOT_HOLD, measured, f"{fast} faster at only {wins} of {len(ratios)} points, a majority needed; {detail}"


@per_run("cnn_max_ratio")
def cnn_max_ratio(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    ratios = _time_ratios(claim, data, trail)
    best = max(ratios, key=lambda k: ratios[k])
    verdict, detail = judge_band(claim, ratios[best], float(claim.params["value"]), float(claim.params["factor"]),
                                 f" at {_label(best)}")
    return verdict, fmt_x(ratios[best]), f"{detail} ({len(ratios)} points)"


def _memory(r: CaseResult) -> float | None:
    """What training adds: the allocator's peak on a GPU; on a CPU the worker's peak RSS above its baseline."""
    if r.device != "cpu":
        return float(r.m.peak_device_mem_bytes) if r.m.peak_device_mem_bytes else None
    if r.m.peak_rss_bytes and r.m.baseline_rss_bytes is not None:
        return float(r.m.peak_rss_bytes - r.m.baseline_rss_bytes)
    return None


@per_run("cnn_memory")
def cnn_memory(claim: Claim, data: ReportData, trail: Trail) -> tuple[str, str, str]:
    p = claim.params
    ratios: dict[Point, float] = {}
    reasons = []
    dropped = 0  # readings at or below zero (a CPU peak RSS under its baseline) say nothing of the memory used
    for device in sorted({r.device for r in data.of("cnn")} | {"cpu"}):
        try:
            slow, fast = _pair(claim, data, trail, device)
        except CannotCheck as exc:
            reasons.append(str(exc))
            continue
        for pt in sorted(slow.keys() & fast.keys()):
            read_s = [m for m in map(_memory, slow[pt]) if m is not None]
            read_f = [m for m in map(_memory, fast[pt]) if m is not None]
            ms, mf = [m for m in read_s if m > 0], [m for m in read_f if m > 0]
            dropped += len(read_s) - len(ms) + len(read_f) - len(mf)
            if ms and mf:
                ratios[pt] = statistics.median(ms) / statistics.median(mf)
    left_out = (f"; {dropped} memory reading(s) at or below zero left out (peak under the baseline)"
                if dropped else "")
    if not ratios:
        raise CannotCheck(("; ".join(reasons) or f"no point with memory measured for both in run {data.run.id}")
                          + left_out)
    wins = sum(v > 1 for v in ratios.values())
    lo, hi = min(ratios.values()), max(ratios.values())
    measured = f"{p['faster']} smaller at {wins} of {len(ratios)} points ({fmt_x(lo)} to {fmt_x(hi)})"
    detail = (f"{p['slower']}/{p['faster']} memory from {fmt_x(lo)} to {fmt_x(hi)}; tolerance: {claim.tolerance}"
              + left_out)
    if wins * 2 > len(ratios):
        return HOLDS, measured, detail
    return DOES_NOT_HOLD, measured, (f"{p['faster']} needed less memory at only {wins} of {len(ratios)} points, "
                                     f"a majority needed; {detail}")


# --- study 004 (catalog, cnn) ------------------------------------------------------------------------------
@rule("datasheet")
def datasheet(claim: Claim, datas: list[ReportData]) -> Outcome:
    """The study's figures for these devices against the catalog's vendor figures (`dlperf hw diff-study`)."""
    from dlperf.hardware.catalog import diff_study

    devices = set(claim.params["devices"])
    rows = [r for r in diff_study() if r["device"] in devices]
    agree = [r for r in rows if r["verdict"] == "agree"]
    disagree = [r for r in rows if r["verdict"] == "disagree"]
    unknown = len(rows) - len(agree) - len(disagree)
    unknown_txt = f"; {unknown} cannot be checked (vendor figure unknown)" if unknown else ""
    measured = f"{len(agree)} of {len(rows)} agree"
    if disagree:
        listed = ", ".join(f"{r['device']} {r['figure']} {_fig(r['study'])} (vendor {_fig(r['vendor'])})"
                           for r in disagree)
        return Outcome(DOES_NOT_HOLD, measured, f"{len(disagree)} of {len(rows)} figures disagree: {listed}"
                                                f"{unknown_txt}; tolerance: {claim.tolerance}")
    if not agree:
        return Outcome(CANNOT_CHECK, None, f"the catalog knows none of the vendor figures ({len(rows)} unknown)")
    return Outcome(HOLDS, measured, f"all {len(agree)} comparable figures agree{unknown_txt}; "
                                    f"tolerance: {claim.tolerance}")


def _fig(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


@rule("cnn_ranking")
def cnn_ranking(claim: Claim, datas: list[ReportData]) -> Outcome:
    """The first device's best images/s above every other listed device's, on the same setup, over all runs."""
    from dlperf.hardware.measured import best_per_setup, cnn_rows

    p = claim.params
    runs = runs_with(datas, "cnn")
    if not runs:
        return Outcome(CANNOT_CHECK, None, not_run(claim, datas))
    trail = Trail()
    results = [r for d in runs for r in trail.take([r for r in d.of("cnn") if r.ok and _training(r.params)
                                                    and r.params.get("model") == p["model"]])]
    envs = {d.run.id: d.env for d in runs}
    rows = best_per_setup(cnn_rows(results, envs, []))
    listed = [p["first"], *p["others"]]
    mine = [r for r in rows if r["entry"] is not None and r["entry"].id in listed and r["share"] == 1.0]
    setups: dict[tuple, dict[str, CnnRow]] = {}
    for r in mine:
        entry = r["entry"]
        assert entry is not None  # `mine` holds catalog devices only
        setups.setdefault((r["framework"], r["model"], r["image_size"], r["precision"]), {})[entry.id] = r
    usable = {k: v for k, v in setups.items() if p["first"] in v and len(v) > 1}
    note = trail.note()
    if not usable:
        seen = sorted({r["device"] for r in rows})
        trained = f"trained {p['model']} on: {', '.join(seen)}" if seen else f"trained no {p['model']}"
        return Outcome(CANNOT_CHECK, None, (
            f"needs {p['model']} training on the {p['first']} and on at least one of {', '.join(p['others'])} "
            f"(same framework, image size, precision); these runs {trained}"
            + (f" ({note})" if note else "")))
    key = sorted(usable)[0]
    by_dev = usable[key]
    order = sorted(by_dev.items(), key=lambda kv: -kv[1]["images_per_s"])  # (catalog id, row), fastest first
    measured = " > ".join(f"{dev_id} {r['images_per_s']:.3g} img/s" for dev_id, r in order)
    run_ids = tuple(dict.fromkeys(r["run_id"] for _, r in order))
    setup = f"{key[0]} {key[1]} {key[2]}px {key[3]}"
    tail = f"; tolerance: {claim.tolerance}" + (f"; {note}" if note else "")
    if order[0][0] == p["first"]:
        return Outcome(HOLDS, measured, f"{p['first']} fastest of {len(order)} ({setup}){tail}", run_ids)
    (top_id, top), mine_r = order[0], by_dev[p["first"]]
    return Outcome(DOES_NOT_HOLD, measured, (
        f"{top_id} is {top['images_per_s'] / mine_r['images_per_s']:.3g}x faster than {p['first']} "
        f"({setup}){tail}"), run_ids)
