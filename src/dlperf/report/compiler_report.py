"""The compiler variants' report (`dlperf bench --variant`; after the model report's in `report.registry`, so in
bench, `report` and the HTML page): per source, device, precision and batch, each variant against `eager`.

Columns: the median per call with its 95% interval (order statistics, repetitions pooled); the speed-up over eager
(eager's time over the variant's) with its 95% interval, from `report.compare.compare_case` (the estimators of
`dlperf compare`: per-call samples for one process a side, per-process medians for more; contended or invalid
processes left out), and no speed-up where a side failed, was contended or had too few samples, or where the
variant failed the correctness gate (the reason said instead); the cold and warm compile times (medians over the
repetitions, `workloads.model.torch_compiled`; an XLA mode's cold one is its first call, `workloads.xla_compile`,
and its warm one says whether it came from the cache); break-even calls: the compile time over the time a call
saves (cold / warm), only where the whole interval is a speed-up; graph breaks (their reasons in the notes); memory
(`peak_above_baseline`) and its ratio to eager's; the correctness gate's status.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from dlperf.analysis.compare import COMPARED, NOT_COMPARED, compare_case
from dlperf.core.result import CaseResult
from dlperf.report.inference_report import _interval, latency
from dlperf.report.model_report import gate_status
from dlperf.report.plots.compiler import Point, speedup_batch_plot
from dlperf.report.sections import Figure, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_mib, format_time
from dlperf.workloads.model.variants import EAGER, VARIANTS
from dlperf.workloads.xla_compile import COLD, COLD_NO_CACHE

#: Longest reason a note quotes from the comparison (every process's validity reason can be long).
NOTE_CHARS = 300

Group = tuple[str, str, str, str, int]  # (source label, framework, device, precision, batch)

#: An XLA mode's record of its cold compile: the case's first call, on an empty persistent cache or with none.
FIRST_CALL_COLD = (COLD, COLD_NO_CACHE)

NOTE = ("speed-up: eager's time per call over the variant's, with its 95% interval (as `dlperf compare`); "
        "cold compile: the first call in a worker whose compiler caches start empty (onnxruntime, openvino: the "
        "session's creation, compile_model; they keep no cache, so no warm figure; tensorflow's xla and jax's "
        "jit: the first call on a new, empty persistent XLA cache, jax's eager: its first call, no cache); warm: "
        "a second fresh process with those caches filled (cache hit: its executable came from the cache); "
        "break-even: compile time / time saved per call (cold / warm; the medians of the processes compared), "
        "shown only where the whole interval is a speed-up; memory: the peak "
        "above the import baseline (on a CPU the worker's resident set, which holds what the compile needed "
        "too), x eager's; a FAIL is never a speed-up")


def grouped(results: list[CaseResult]) -> dict[Group, dict[str, list[CaseResult]]]:
    """(source, framework, device, precision, batch) -> variant -> repetitions, for the model workload."""
    by: dict[Group, dict[str, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r.workload != "model":
            continue
        p = r.params
        label = f"{p.get('source')} ({p.get('task', 'infer')})"
        key = (label, r.framework, r.device, str(p.get("precision", "fp32")), int(p.get("batch") or 1))
        by[key][str(p.get("variant") or EAGER)].append(r)
    return {k: dict(sorted(v.items(), key=lambda kv: list(VARIANTS).index(kv[0]) if kv[0] in VARIANTS else 99))
            for k, v in sorted(by.items())}


def speedup(eager: list[CaseResult], rows: list[CaseResult], status: str,
            notes: list[str], name: str) -> tuple[str, float | None]:
    """(the speed-up cell, the seconds a call saves where the whole interval is a speed-up, else None: eager's
    median less the variant's, over the processes compared); why there is no speed-up goes to `notes`."""
    if status == "fail":
        return "FAIL: not comparable", None
    cmp = compare_case("variant", eager, rows)
    if cmp.verdict not in COMPARED or cmp.ratio is None:
        if cmp.verdict in NOT_COMPARED:  # every process of a side left out: which side, not every reason again
            sides = [{"A": EAGER, "B": name}[n[0]] for n in cmp.notes if n[:2] in ("A:", "B:")]
            said = (f"every {' and every '.join(sides)} process was {cmp.verdict} (`dlperf show` gives each "
                    "reason)")
        else:
            said = cmp.label if len(cmp.label) <= NOTE_CHARS else cmp.label[:NOTE_CHARS] + "..."
        notes.append(f"{name}: no speed-up: {said}")
        return f"{MISSING} ({cmp.verdict})", None
    if cmp.ci_low is None or cmp.ci_high is None:
        return f"{1 / cmp.ratio:.2f}x (no interval)", None
    low, high = 1 / cmp.ci_high, 1 / cmp.ci_low
    saved = cmp.median_a_s - cmp.median_b_s if low > 1 and cmp.median_a_s and cmp.median_b_s else None
    return f"{1 / cmp.ratio:.2f}x ({low:.2f}-{high:.2f})", saved


def _median(rs: list[CaseResult], key: str) -> float | None:
    values = [float(c[key]) for r in rs if r.ok for c in [r.m.get("compile") or {}] if c.get(key) is not None]
    return statistics.median(values) if values else None


def _breaks(rs: list[CaseResult], label: str, notes: list[str]) -> str:
    """The graph-break cell; their reasons, and a warm compile that failed, go to `notes`."""
    record = next((r.m.get("compile") for r in rs if r.ok and r.m.get("compile")), None) or {}
    if record.get("warm_error"):
        notes.append(f"{label}: no warm compile: {record['warm_error']}")
    if record.get("no_warm"):
        notes.append(f"{label}: no warm compile: {record['no_warm']}")
    if record.get("graph_breaks_error"):
        notes.append(f"{label}: graph breaks not counted: {record['graph_breaks_error']}")
    if "graph_breaks" not in record:
        return "whole graph" if record.get("variant") == "export" else MISSING
    for brk in record.get("break_reasons") or []:
        notes.append(f"{label}: graph break at {brk.get('where') or 'an unknown place'}: {brk.get('reason')}")
    graphs = record.get("graphs")
    return f"{record['graph_breaks']} ({graphs} graph{'' if graphs == 1 else 's'})"


def group_table(group: Group, variants: dict[str, list[CaseResult]]) -> list[Section]:
    label, fw, dev, prec, batch = group
    eager = variants.get(EAGER, [])
    header = ["variant", "median", "95% interval", "speed-up vs eager", "cold compile", "warm compile",
              "break-even calls", "graph breaks", "memory (x eager)", "correctness"]
    eager_mem = peak_above_baseline(eager)
    rows, notes = [], []
    for name, rs in variants.items():
        lat = latency(rs)
        failed = [r for r in rs if not r.ok]
        status, why = gate_status(rs)
        if status in ("fail", "nondeterministic", "not checked"):
            notes.append(f"{name}: {status}: {why}")
        if lat is None:
            if failed:
                notes.append(f"{name}: {failed[0].status}: {failed[0].reason}")
            rows.append([name, MISSING, MISSING, f"{MISSING} ({failed[0].status if failed else 'not measured'})"]
                        + [MISSING] * 5 + [status])
            continue
        if failed:
            notes.append(f"{name}: {len(failed)} of {len(rs)} repetitions {failed[0].status}: {failed[0].reason}")
        cold, warm = _median(rs, "cold_s"), _median(rs, "warm_s")
        if cold is None and _first_call_is_cold(rs):  # an XLA mode's (`xla_compile`): its compile is its first call
            firsts = [float(r.m.first_call_s) for r in rs if r.ok and r.m.first_call_s is not None]
            cold = statistics.median(firsts) if firsts else None
        if name == EAGER:
            cell, saved = "reference", None
        elif not eager:
            cell, saved = f"{MISSING} (no eager case)", None
        else:
            cell, saved = speedup(eager, rs, status, notes, name)
        rows.append([name, format_time(lat["median_s"]), _interval(lat), cell,
                     format_time(cold) if cold is not None else MISSING,
                     format_time(warm) + _hit(rs) if warm is not None else MISSING,
                     _break_even(saved, cold, warm),
                     _breaks(rs, name, notes), _memory(rs, eager_mem), status])
    title = f"{label}: compiler variants on {fw} {dev} {prec}, batch {batch}"
    out: list[Section] = [Table(title, header, rows, heading=f"## Compilers: {label}")]
    return out + [Note(n) for n in notes]


def _first_call_is_cold(rs: list[CaseResult]) -> bool:
    """Whether the compile record says the cold compile is the case's first call (an XLA mode's, as
    `xla_compile.record` writes it)."""
    return any((r.m.get("compile") or {}).get("cold") in FIRST_CALL_COLD for r in rs if r.ok)


def _hit(rs: list[CaseResult]) -> str:
    """Whether the warm compiles came from the cache (an XLA mode's `warm_hit`), as a suffix; '' where unsaid."""
    hits = [c["warm_hit"] for r in rs if r.ok for c in [r.m.get("compile") or {}] if "warm_hit" in c]
    if not hits:
        return ""
    return " (cache hit)" if all(hits) else " (no cache hit)" if not any(hits) else f" ({sum(hits)}/{len(hits)} hit)"


def _break_even(saved_s: float | None, cold: float | None, warm: float | None) -> str:
    """Calls until the time saved pays the compile back: cold / warm."""
    if not saved_s or saved_s <= 0 or cold is None:
        return MISSING
    return f"{cold / saved_s:,.0f}" + (f" / {warm / saved_s:,.0f}" if warm is not None else "")


def peak_above_baseline(rs: list[CaseResult]) -> int | None:
    """The largest peak over the repetitions: the device allocator's off the CPU, else the worker's resident set
    above its import baseline (a compiled path's includes what its compile held)."""
    found = []
    for r in rs:
        if not r.ok:
            continue
        if r.device != "cpu" and r.m.peak_device_mem_bytes:
            found.append(int(r.m.peak_device_mem_bytes))
        elif r.m.peak_rss_bytes is not None and r.m.baseline_rss_bytes is not None:
            found.append(int(r.m.peak_rss_bytes) - int(r.m.baseline_rss_bytes))
    return max(found) if found else None


def _memory(rs: list[CaseResult], eager: int | None) -> str:
    mine = peak_above_baseline(rs)
    if mine is None:
        return MISSING
    return format_mib(mine) + (f" ({mine / eager:.2f}x)" if eager else "")


def speedup_points(groups: dict[Group, dict[str, list[CaseResult]]]) -> dict[str, dict[str, list[Point]]]:
    """Per source, framework, device and precision: each variant's (batch, speed-up, 95% low, high) where it has
    an interval (a failed gate, a contended or failed side: no point, as in the table)."""
    panels: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    for (label, fw, dev, prec, batch), variants in groups.items():
        eager = variants.get(EAGER, [])
        for name, rows in variants.items():
            if name == EAGER or not eager or gate_status(rows)[0] == "fail":
                continue
            cmp = compare_case("variant", eager, rows)
            if cmp.verdict in COMPARED and cmp.ratio and cmp.ci_low and cmp.ci_high:
                panels[f"{label}: {fw} {dev} {prec}"][name].append((batch, 1 / cmp.ratio, 1 / cmp.ci_high,
                                                                     1 / cmp.ci_low))
    return {t: dict(v) for t, v in panels.items()}


def sections(data: ReportData) -> list[Section]:
    """One table per source, device, precision and batch that has a compiler variant, and the speed-up against
    batch where a variant ran at two batches or more; none without a compiler variant."""
    groups = grouped(data.results)
    if not any(set(v) - {EAGER} for v in groups.values()):
        return []
    out: list[Section] = []
    for group, variants in groups.items():
        if set(variants) - {EAGER}:  # a group of eager alone (an int8 path, say) has nothing to compare here
            out += group_table(group, variants)
    paths = speedup_batch_plot(speedup_points(groups), data.plot_dir)
    if paths:
        out.append(Figure(paths, "each variant's speed-up over eager against batch size (95% intervals)",
                          heading="## Compiler speed-up against batch size"))
    return out + [Note(NOTE)]
