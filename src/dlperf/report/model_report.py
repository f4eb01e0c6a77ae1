"""The `model` workload's report (`dlperf bench SOURCE`): per source, one table of path (framework, device,
precision) x batch, and latency against batch size.

Columns: the median latency per call with its 95% interval (order statistics, repetitions pooled); at batch 1 the
p90 and p99 with theirs; throughput from the median; the ratio to the reference path (torch, fp32, same device and
batch) with an interval from the two medians' 95% intervals (low/high over high/low: at least 90% together);
host memory above the import baseline; MFU (FLOPs per call counted by FlopCounterMode on the eager module, over
the peak of the dtype the products ran in, its source named, or not shown); the accuracy cost against the
reference of a path below fp32 (the gate's largest error over the output's scale and top-1 agreement, beside
its status; what became int8 on an int8 path, in a note); and the correctness gate's status.
A path whose status is `fail` keeps its figures, but its ratio cell says FAIL beside it, and it is never called
faster: no ranking is made from it.
"""

from __future__ import annotations

from collections import defaultdict

from dlperf.core.result import CaseResult
from dlperf.report.inference_report import Latency, _interval, failure_mark, latency, memory_cells, plot_panels
from dlperf.report.plots.serving import latency_batch_plot
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.report.transformer_report import _ci, generation, peak_for
from dlperf.timing import Measurement
from dlperf.timing.stats import quantile, quantile_ci
from dlperf.units import MISSING, format_pct, format_rate, format_time
from dlperf.workloads.model.gate import TOLERANCE

REFERENCE = ("torch", "fp32")
GATE_NOTE = ("correctness: each path's outputs on fixed seeded inputs against the eager fp32 torch reference "
             "(run twice first: a model that differs from itself is nondeterministic); pass within the tolerance "
             "of its precision relative to the output's scale ("
             + ", ".join(f"{k} {v:g}" for k, v in TOLERANCE.items()) + ") and, for logits, the same "
             "top-1 class; a FAIL is never ranked")
ERROR_NOTE = ("correctness (error, top-1) of a path below fp32: its accuracy cost against the fp32 reference, the "
              "largest |output - reference| over the output's scale (its largest |value|; worst repetition) and, "
              "for logits (last axis of 2 or more), the share of positions whose top-1 class is the reference's")
RATIO_NOTE = ("vs reference: the path's median time over the torch fp32 path's at the same device and batch (a time "
              "ratio: below 1.00x is faster, 2.00x takes twice as long; a speed-up is its inverse); the interval "
              "from the two medians' 95% intervals")

Key = tuple[str, str, str, int]


def grouped(results: list[CaseResult]) -> dict[str, dict[Key, list[CaseResult]]]:
    """Per source and task: (framework, device, precision, batch) -> repetitions; a compiler variant's precision
    names it ("fp32 compile"), so that it is a path of its own, never pooled with eager."""
    by: dict[str, dict[Key, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r.workload != "model":
            continue
        p = r.params
        label = f"{p.get('source')} ({p.get('task', 'infer')}" + (f", seq {p['seq']}" if p.get("seq") else "") + ")"
        variant = str(p.get("variant") or "eager")  # a compiler's path is its own row: "fp32 compile"
        prec = str(p.get("precision", "fp32")) + ("" if variant == "eager" else f" {variant}")
        by[label][(r.framework, r.device, prec, int(p.get("batch") or 1))].append(r)
    return {k: dict(sorted(v.items())) for k, v in sorted(by.items())}


def gate_status(rs: list[CaseResult]) -> tuple[str, str]:
    """(status word, why) of the worst repetition: fail > nondeterministic > not checked > pass > reference."""
    order = ["fail", "nondeterministic", "not checked", "pass", "reference"]
    found = [(r.metrics or {}).get("correctness") or {} for r in rs if r.ok]
    found = [c for c in found if c.get("status") in order]
    if not found:
        return MISSING, ""
    worst = min(found, key=lambda c: order.index(c["status"]))
    return worst["status"], str(worst.get("reason") or "")


def accuracy_cost(rs: list[CaseResult]) -> str:
    """The worst repetition's error over the output's scale, and its top-1 agreement where it has logits."""
    found = [c for r in rs if r.ok for c in [(r.metrics or {}).get("correctness") or {}] if "rel_err" in c]
    if not found:
        return ""
    worst = max(found, key=lambda c: float(c["rel_err"]))
    agree = min((float(c["top1_agreement"]) for c in found if "top1_agreement" in c), default=None)
    return f"error {float(worst['rel_err']):.2g}" + (f", top-1 {format_pct(agree, '.0f')}" if agree is not None else "")


def int8_note(key: Key, rs: list[CaseResult]) -> str | None:
    """What became int8 on an int8 path (its quantizer and the nodes or layers counted), from its first result."""
    done = next(((r.metrics or {}).get("int8") for r in rs if r.ok and (r.metrics or {}).get("int8")), None)
    if not done:
        return None
    fw, dev, prec, batch = key
    return f"{fw} {dev} {prec} batch {batch}: {done.get('quantizer')}: {done.get('executed')}"


def _tail(rs: list[CaseResult], q: float) -> str:
    times = sorted(t for r in rs if r.ok and r.measurement for t in Measurement.from_dict(r.measurement).times_s)
    if not times:
        return MISSING
    ci = quantile_ci(times, q)
    return format_time(quantile(times, q)) + (f" ({format_time(ci[0])}-{format_time(ci[1])})" if ci else " (n small)")


def _ratio(lat: Latency, ref: Latency | None, status: str) -> str:
    if ref is None:
        return MISSING
    text = f"{lat['median_s'] / ref['median_s']:.2f}x"
    low, high, ref_low, ref_high = lat["low_s"], lat["high_s"], ref["low_s"], ref["high_s"]
    if low is not None and high is not None and ref_low is not None and ref_high is not None:
        text += f" ({low / ref_high:.2f}-{high / ref_low:.2f})"
    return text + (" FAIL: not comparable" if status == "fail" else "")


def _mfu(data: ReportData, rs: list[CaseResult], lat: Latency, sources: set[str]) -> str:
    r = rs[0]
    flops = (r.metrics or {}).get("flops_per_call")
    if not flops:
        return MISSING
    peak, source = peak_for(data.env, r.device, str((r.metrics or {}).get("mfu_dtype") or "float32"), r.m.threads)
    sources.add(source)
    return format_pct(flops / lat["median_s"] / peak, ".2f") if peak else f"{MISSING} (no peak)"


def source_table(data: ReportData, label: str, cases: dict[Key, list[CaseResult]]) -> list[Section]:
    generate = any(r.params.get("task") == "generate" for rs in cases.values() for r in rs)
    header = ["framework", "device", "precision", "batch", "median", "95% interval", "p90 (b=1)", "p99 (b=1)",
              "tokens/s" if generate else "samples/s", "vs reference", "memory", "MFU", "correctness"]
    lats = {k: latency(rs) for k, rs in cases.items()}
    rows: list[list[str]] = []
    notes: list[str] = []
    sources: set[str] = set()
    fails: list[str] = []
    int8s: list[str] = []
    for (fw, dev, prec, batch), rs in cases.items():
        lat = lats[(fw, dev, prec, batch)]
        mark = failure_mark(notes, f"{fw} {dev} {prec} batch {batch}", rs, lat is not None)
        status, why = gate_status(rs)
        cost = accuracy_cost(rs)
        if status in ("fail", "nondeterministic", "not checked"):
            notes.append(f"[{len(notes) + 1}] {fw} {dev} {prec} batch {batch}: {status}: {why}")
            status += f" [{len(notes)}]"
        if status.startswith("fail"):
            fails.append(fw)
        host, _ = memory_cells(rs)
        if lat is None:
            rows.append([fw, dev, prec, str(batch), MISSING + mark] + [MISSING] * 7 + [status])
            continue
        ref = None if (fw, prec) == REFERENCE else lats.get((REFERENCE[0], dev, REFERENCE[1], batch))
        rate = format_rate(lat["samples"] / lat["median_s"]) if lat["samples"] else MISSING
        one = batch == 1
        rows.append([fw, dev, prec, str(batch), format_time(lat["median_s"]) + mark, _interval(lat),
                     _tail(rs, 0.9) if one else "", _tail(rs, 0.99) if one else "", rate,
                     "reference" if (fw, prec) == REFERENCE else _ratio(lat, ref, status.split(" [")[0]), host,
                     _mfu(data, rs, lat, sources), status + (f" ({cost})" if prec != "fp32" and cost else "")])
        quantized = int8_note((fw, dev, prec, batch), rs) if batch == min(b for *_, b in cases) else None
        if quantized:
            int8s.append(quantized)
    params = next((int((r.metrics or {}).get("param_count") or 0) for rs in cases.values() for r in rs if r.ok), 0)
    flops = next(((r.metrics or {}).get("flops_per_call") for rs in cases.values() for r in rs if r.ok), None)
    intro = f"{params:,} parameters" + (f"; FLOPs per call at batch 1: {flops:.3g}" if flops else "")
    out: list[Section] = [Table(f"{label}: latency, throughput, memory, MFU and correctness per path and batch",
                                header, rows, heading=f"## Model: {label}", intro=intro)]
    out += [Note(n) for n in notes]
    out += [Note(f"int8: {n}") for n in int8s]
    if generate:
        out += token_times(cases)
    own = next(((r.metrics or {}).get("reference") for rs in cases.values() for r in rs if r.ok), None)
    if own:  # a FILE.onnx: no torch module, so its reference is a runtime's and no path has a ratio
        out.append(Note(f"{label}: an ONNX file has no torch reference; each path is checked against {own}"))
    out += [Note(f"MFU peak: {s}") for s in sorted(sources)]
    if fails:
        out.append(Note(f"FAIL: {', '.join(sorted(set(fails)))} computed something else than the reference; "
                        "its speed is not a speed-up"))
    return out


def token_times(cases: dict[Key, list[CaseResult]]) -> list[Section]:
    """A generate table's notes: each path's time to the first token and per output token, p50 with its 95%
    interval over the processes' pooled calls (`transformer_report.generation`, as the transformer report's)."""
    lines = []
    for (fw, dev, prec, batch), rs in cases.items():
        ok = [r for r in rs if r.ok and r.metrics is not None and r.m.call_phases]
        if ok:
            g = generation(ok)
            lines.append(f"{fw} {dev} {prec} batch {batch}: time to first token {_ci(g, 'ttft_p50')}, per output "
                         f"token {_ci(g, 'tpot_p50')}")
    head = ("generate (p50 [95% interval]; tokens/s: the new tokens of the batch per second of the whole call): ")
    return [Note(head + "; ".join(lines))] if lines else []


def sections(data: ReportData) -> list[Section]:
    groups = grouped(data.results)
    if not groups:
        return []
    out: list[Section] = [Heading("## Your model", "Each path of each source, against the eager fp32 torch "
                                                   "reference.")]
    for label, cases in groups.items():
        out += source_table(data, label, cases)
    out += [Note(GATE_NOTE), Note(ERROR_NOTE), Note(RATIO_NOTE)]
    panels = plot_panels(groups)  # the same (framework device precision, batch) keys as the inference study's
    paths = latency_batch_plot(panels, data.plot_dir, stem="model-latency-per-batch")
    if paths:
        out.append(Figure(paths, "latency per call against batch size, per source and path",
                          heading="## Model latency against batch size"))
    return out
