"""The `ddp` workload's report: data-parallel training throughput and scaling over world sizes.

One table pair per series of cases that differ only in their world size (inner workload, model and input shape,
scaling mode and batch, threads per rank, DDP's bucket size, framework, device, backend), strong scaling first, then
weak, each saying what stays fixed. The first table has a row per world size: the global batch and each rank's, the
median step time (per optimizer step, ended when its last rank ended it) with its 95% interval (order statistics of
the raw samples recomputed on load; repetitions pooled), the samples per second from that median (images/s, or
tokens/s for the transformer), scaling efficiency samples/s(N) / (N x samples/s(1)) and the speed-up over world size
1 (both "-" with the reason where the series has no world size 1 case that ran). The second has the time in
communication per step from torch's profiler, the least over the ranks and the most beside it
(`metrics["ddp"]["comm"]`, with its stored note) and its share of the profiled step, and each rank's own median step
time: the slowest against the fastest. Cases that did not run keep their row with their status and reason; noisy or
contended figures carry the ops report's marks.
A plot per series draws samples/s and efficiency against world size beside the ideal (linear) line.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from dlperf.core.payloads import DdpMetrics
from dlperf.core.result import CaseResult
from dlperf.report.inference_report import failure_mark, latency, sample_unit
from dlperf.report.ops_report import VALIDITY_MARKS, VALIDITY_MARKS_NOTE
from dlperf.report.plots.scaling import ScalingPanel, scaling_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_iqr, format_pct, format_rate, format_time
from dlperf.workloads.ddp import DdpParams

WORKLOAD = "ddp"
SCALINGS = ("strong", "weak")
FIXED = {"strong": "the global batch stays fixed and is split over the ranks (each rank's batch shrinks)",
         "weak": "each rank's batch stays fixed (the global batch grows with the ranks)"}
INTRO = ("Data-parallel training under torchrun (DistributedDataParallel): a case is one job of N ranks on one "
         "node. Step time: one optimizer step (forward, backward with DDP's gradient all-reduce, update), from "
         "the last rank's end of the step before to the last rank's end of this one, median with its 95% "
         "interval. Efficiency = samples/s(N) / (N x samples/s(1)); "
         "speed-up = samples/s(N) / samples/s(1), both against the world size 1 case of the same series.")
COMM_NOTE = ("communication: each rank's collective ops per step under torch's profiler over extra steps (gloo: "
             "their CPU-side time; NCCL: the nccl kernels' GPU time); the figure is the smallest over the ranks (the "
             "closest to the transfer itself: the first rank to arrive also waits for the others), the largest "
             "(transfer plus waiting) beside it; DDP overlaps them with the backward pass, so the share is not time "
             "the step would save without them")
#: The parameters that do not make two cases different points of a scaling series.
NOT_SERIES = ("world_size",)


#: What a case that stored no job record (a failed case) reads as: every field absent.
NO_RECORD = DdpMetrics()


def record(r: CaseResult) -> DdpMetrics:
    """The case's stored `metrics["ddp"]`, NO_RECORD where it has none (a failed case)."""
    return r.m.ddp_summary() or NO_RECORD


def world_size(r: CaseResult) -> int:
    return int(record(r).world_size or r.params.get("world_size") or 0)


def params_of(p: Mapping[str, object]) -> DdpParams | None:
    """The case's parameters as the workload parses them (every default resolved); None where this version does
    not accept them (a row stored by another version)."""
    try:
        return DdpParams.model_validate(p)
    except (ValueError, KeyError, TypeError):
        return None


def batches(p: dict[str, Any]) -> tuple[int | None, int | None]:
    """(global batch, batch per rank) as `DdpParams` splits them; (None, None) where it does not parse them."""
    parsed = params_of(p)
    return (None, None) if parsed is None else (parsed.global_batch, parsed.batch_per_rank)


def backend(r: CaseResult) -> str:
    """The stored backend, else the one the launcher picks for the case's device."""
    from dlperf.distributed.launch import backend_for

    return record(r).backend or backend_for(r.device)


def shape_label(p: dict[str, Any]) -> str:
    """The trained model and its input: 'cnn resnet18 224px', 'transformer gpt2-tiny T=128' (defaults resolved
    as the workload resolves them)."""
    inner = str(p.get("workload", "?"))
    parsed = params_of(p)
    # parameters this version does not know: named as stored
    raw = parsed.inner_params() if parsed is not None else {k: p[k] for k in ("seq_len", "image_size") if p.get(k)}
    if inner == "transformer":
        return f"transformer {p.get('model')} T={raw.get('seq_len') or MISSING}"
    size = raw.get("image_size")
    if size is None:
        try:
            from dlperf.workloads.cnn import CnnParams

            size = CnnParams.model_validate({"model": p.get("model"), "batch": 1}).size()
        except (ValueError, KeyError):
            size = None
    return f"{inner} {p.get('model')}" + (f" {size}px" if size else "")


SeriesKey = tuple[str, str, str, str, str, str]  # scaling, model label, framework, device, backend, the rest


def series_key(r: CaseResult) -> SeriesKey:
    """What a scaling series holds fixed: every parameter but the world size, the framework, device, backend."""
    p = r.params
    rest = ", ".join(f"{k}={p[k]}" for k in sorted(p) if k not in NOT_SERIES + ("workload", "model", "scaling"))
    return (str(p.get("scaling", "strong")), shape_label(p), r.framework, r.device, backend(r), rest)


def setup_text(p: dict[str, Any]) -> str:
    """What a series holds fixed besides the model, in words: its batch, threads per rank, DDP's bucket size and
    any other parameter."""
    batch, scaling = p.get("batch", MISSING), p.get("scaling", "strong")
    parts = [f"global batch {batch} split over the ranks" if scaling == "strong" else f"batch {batch} per rank"]
    parts.append(f"{p.get('threads_per_rank', 1)} thread(s) per rank")
    parts.append(f"DDP bucket {p.get('bucket_cap_mb', 25):g} MiB")
    parts.append(f"{p.get('nodes', 1)} node")
    known = {"workload", "model", "scaling", "batch", "threads_per_rank", "bucket_cap_mb", "nodes", "seq_len",
             "image_size", "world_size", "profile_steps"}
    parts += [f"{k}={p[k]}" for k in sorted(p) if k not in known]
    return ", ".join(parts)


def series(results: list[CaseResult]) -> dict[SeriesKey, dict[int, list[CaseResult]]]:
    """Per series (strong first): world size -> the case's repetitions, in world-size order."""
    by: dict[SeriesKey, dict[int, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by[series_key(r)][world_size(r)].append(r)
    order = sorted(by, key=lambda k: (SCALINGS.index(k[0]) if k[0] in SCALINGS else 2, k))
    return {k: dict(sorted(by[k].items())) for k in order}


def validity_mark(rs: list[CaseResult]) -> str:
    """The worst validity among the ok repetitions, as the ops report marks it ('' when valid or unknown)."""
    found = {r.m.validity for r in rs if r.ok}
    return next((mark for v, mark in VALIDITY_MARKS.items() if v in found), "")


def interval_text(low_s: float | None, high_s: float | None) -> str:
    """A 95% interval, '20.6-20.9 ms' where both ends share a unit; '- (n < 6)' where there is none."""
    if low_s is None or high_s is None:
        return f"{MISSING} (n < 6)"
    low, high = format_time(low_s), format_time(high_s)
    low_num, _, low_unit = low.partition(" ")
    high_num, _, high_unit = high.partition(" ")
    return f"{low_num}-{high_num} {low_unit}" if low_unit == high_unit else f"{low} - {high}"


def rate(rs: list[CaseResult]) -> float | None:
    """Global samples per second from the pooled median step time (None where no repetition ran)."""
    lat = latency(rs)
    if lat is None or not lat["samples"] or lat["median_s"] <= 0:
        return None
    return float(lat["samples"]) / float(lat["median_s"])


def efficiency(rate_n: float | None, rate_1: float | None, n: int) -> float | None:
    """Scaling efficiency samples/s(N) / (N x samples/s(1)); None where either rate is unknown."""
    if rate_n is None or rate_1 is None or rate_1 <= 0 or n < 1:
        return None
    return rate_n / (n * rate_1)


def baseline(by_n: dict[int, list[CaseResult]]) -> tuple[float | None, str | None]:
    """(samples/s at world size 1, None) or (None, why efficiency and speed-up cannot be given)."""
    ones = by_n.get(1)
    if not ones:
        return None, "no world size 1 case of these parameters in this run"
    base = rate(ones)
    if base is None:
        r = next(r for r in ones if not r.ok)
        return None, f"the world size 1 case ended {r.status} ({r.reason or 'no reason stored'})"
    return base, None


def unit_of(rs: list[CaseResult]) -> str:
    """The series' sample unit (image, token): stored with a case, else the inner workload's."""
    for r in rs:
        if unit := record(r).sample_unit:
            return unit
    return sample_unit(str(rs[0].params.get("workload", "")))


def status_cell(rs: list[CaseResult]) -> str:
    """The repetitions' status: the one they share, else how many of them ended ok ("2/3 ok")."""
    kinds = list(dict.fromkeys(r.status for r in rs))
    return kinds[0] if len(kinds) == 1 else f"{sum(r.ok for r in rs)}/{len(rs)} ok"


def throughput_table(key: SeriesKey, by_n: dict[int, list[CaseResult]]) -> list[Section]:
    """The series' table over world sizes and the notes under it."""
    scaling, label, fw, device, back, _ = key
    every = [r for rs in by_n.values() for r in rs]
    unit = unit_of(every)
    statuses = not all(r.ok for r in every)
    header = (["ranks", "batch", "per rank", "median step", "95% interval", "steps", f"{unit}s/s",
               "efficiency", "speed-up"] + (["status"] if statuses else []))
    base, why = baseline(by_n)
    rows: list[list[str]] = []
    notes: list[str] = []
    for n, rs in by_n.items():
        glob, per = batches(rs[0].params)
        lat = latency(rs)
        mark = failure_mark(notes, f"world size {n}", rs, lat is not None)
        status = [status_cell(rs)] if statuses else []
        ident = [str(n), str(glob) if glob else MISSING, str(per) if per else MISSING]
        if lat is None:
            rows.append(ident + [f"{MISSING}{mark}", MISSING, MISSING, MISSING, MISSING, MISSING] + status)
            continue
        vmark = validity_mark(rs)
        r_n = rate(rs)
        eff = efficiency(r_n, base, n)
        speed = f"{r_n / base:.2f}x" if r_n is not None and base else MISSING
        rows.append(ident + [format_time(lat["median_s"]) + vmark + mark, interval_text(lat["low_s"], lat["high_s"]),
                             str(lat["n"]), format_rate(r_n), format_pct(eff, ".0f"), speed] + status)
    fixed = FIXED.get(scaling, "")
    title = f"ddp {scaling} scaling: {label}, {fw} {device} {back}: {fixed}"
    intro = f"Fixed: {setup_text(every[0].params)}. Batch: the global batch (one step's samples over all ranks)."
    out: list[Section] = [Table(title, header, rows, heading=f"### {scaling.capitalize()} scaling: {label} "
                                f"({fw} {device}, {back})", intro=intro)]
    if why:
        out.append(Note(f"efficiency and speed-up: {MISSING}: {why}"))
    out += [Note(n) for n in notes]
    return out


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def comm_cells(rs: list[CaseResult]) -> tuple[list[str], list[str]]:
    """(comm per step, profiled step, its share; the median over the ok repetitions) and the stored notes."""
    comms = [c for r in rs if r.ok and (c := record(r).comm) is not None]
    if not comms:
        return [f"{MISSING} (not stored)", MISSING, MISSING], []
    per, step = _median([c.comm_s_per_step for c in comms]), _median([c.step_s_profiled for c in comms])
    most = _median([c.comm_s_per_step_max for c in comms])
    share = _median([c.comm_fraction for c in comms])
    notes = [c.note for c in comms if c.note]
    per_text = format_time(per) + (f" (max {format_time(most)})" if most is not None and per is not None else "")
    return [per_text, format_time(step), format_pct(share, ".1f")], notes


def imbalance_cells(rs: list[CaseResult]) -> list[str]:
    """The slowest and the fastest rank's own median step time (each rank's median over the repetitions), and
    how much slower the slowest is."""
    per_rank: dict[int, list[float]] = defaultdict(list)
    for r in rs:
        if r.ok:
            for i, t in enumerate(record(r).rank_step_s_median):
                if t is not None:
                    per_rank[i].append(t)
    if not per_rank:
        return [f"{MISSING} (not stored)", MISSING, MISSING]
    medians = {i: statistics.median(ts) for i, ts in per_rank.items()}
    slow, fast = max(medians, key=lambda i: medians[i]), min(medians, key=lambda i: medians[i])
    spread = medians[slow] / medians[fast] - 1 if medians[fast] > 0 else None
    return [f"{format_time(medians[slow])} (r{slow})", f"{format_time(medians[fast])} (r{fast})",
            format_pct(spread, "+.1f")]


def comm_table(key: SeriesKey, by_n: dict[int, list[CaseResult]], notes: dict[str, set[int]]) -> list[Section]:
    """Communication and imbalance per world size that ran; the stored comm notes go to `notes` (text -> the
    world sizes it was stored for), drawn once under every table."""
    scaling, label, fw, device, back, _ = key
    rows = []
    for n, rs in by_n.items():
        if not any(r.ok for r in rs):
            continue
        comm, why = comm_cells(rs)
        for text in why:
            notes.setdefault(text, set()).add(n)
        rows.append([str(n)] + comm + imbalance_cells(rs))
    if not rows:
        return []
    header = ["ranks", "comm/step", "profiled step", "comm share", "slowest rank", "fastest rank", "spread"]
    out: list[Section] = [Table(f"ddp {scaling} scaling: {label}, {fw} {device} {back}: communication (profiler, "
                                "the least over the ranks) and each rank's own median step", header, rows,
                                intro="Communication per step (torch's profiler: the least over the ranks, the "
                                      "most beside it) and its share of the profiled step; each rank's own median "
                                      "step time, the slowest against the fastest.")]
    return out


def plot_panels(groups: dict[SeriesKey, dict[int, list[CaseResult]]]) -> dict[str, ScalingPanel]:
    """Per series: its unit, (world size, samples/s, efficiency or None) per world size that ran, the base rate."""
    panels: dict[str, ScalingPanel] = {}
    for key, by_n in groups.items():
        base, _ = baseline(by_n)
        points = [(n, r_n, efficiency(r_n, base, n)) for n, rs in by_n.items() if (r_n := rate(rs)) is not None]
        if points:
            unit = unit_of([r for rs in by_n.values() for r in rs])
            panels[f"{key[0]}: {key[1]} ({key[2]} {key[3]} {key[4]})"] = {"unit": unit, "points": points,
                                                                           "base": base}
    return panels


def sections(data: ReportData) -> list[Section]:
    """The ddp report: strong-scaling series, then weak, each a throughput table and a communication table, then
    the plot."""
    groups = series(data.of(WORKLOAD))
    if not groups:
        return []
    out: list[Section] = [Heading("## Data-parallel training (ddp): throughput and scaling", INTRO)]
    shown: set[str] = set()
    comm_notes: dict[str, set[int]] = {}
    for key, by_n in groups.items():
        if key[0] not in shown:
            shown.add(key[0])
            fixed = FIXED.get(key[0], key[0])
            out.append(Heading(f"## {key[0].capitalize()} scaling", f"{fixed[0].upper()}{fixed[1:]}."))
        out += throughput_table(key, by_n)
        out += comm_table(key, by_n, comm_notes)
    if any(validity_mark([r]) for r in data.of(WORKLOAD)):
        out.append(Note(VALIDITY_MARKS_NOTE))
    out += [Note(f"comm note (world size {', '.join(map(str, sorted(ns)))}): {text}")
            for text, ns in comm_notes.items()]
    if any(isinstance(s, Table) and s.header[1] == "comm/step" for s in out):
        out.append(Note(COMM_NOTE, markdown=COMM_NOTE[0].upper() + COMM_NOTE[1:] + "."))
    paths = scaling_plot(plot_panels(groups), data.plot_dir, stem="ddp-scaling")
    if paths:
        out.append(Figure(paths, "ddp samples/s and scaling efficiency against world size, ideal lines dashed",
                          heading="## DDP scaling against world size"))
    return out


def progress_detail(r: CaseResult, base_rate: float | None = None) -> str:
    """The run's line for an ok ddp case: world size and samples/s (and efficiency where the series' world size 1
    rate is given)."""
    m = r.m
    n = world_size(r)
    unit = unit_of([r])
    text = (f"median {format_time(m.median_s)} (IQR {format_iqr(m.iqr_rel)}, n={m.n_samples}), world size {n}: "
            f"{format_rate(m.samples_per_s)} {unit}s/s")
    eff = efficiency(m.samples_per_s, base_rate, n)
    if eff is not None and n > 1:
        text += f", scaling efficiency {format_pct(eff, '.0f')} (vs world size 1)"
    return text
