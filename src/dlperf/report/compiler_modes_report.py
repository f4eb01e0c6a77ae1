"""The compiler-mode studies' report (`compilers_xla` on the mlp, `compilers_xla_transformer`; issue 32).

The modes are adapters of one family running the same builders: `jax` (jitted) and `jax-nojit`
(jax.disable_jit); `tensorflow` (tf.function graphs), `tensorflow-xla` (jit_compile=True) and
`tensorflow-eager`. Per case (device and parameters): each mode's median time per step with its 95% interval
(order statistics, repetitions pooled) and its first call (the trace and compile, medians over repetitions);
then each speed-up, the baseline's time over the mode's, with its 95% interval from `analysis.compare.
compare_case` (the estimators of `dlperf compare`: per-call samples for one process a side, per-process medians
for more; contended or invalid processes left out, and then no speed-up, with the reason). Beside the first call,
the warm compile of the XLA modes (`workloads.xla_compile`): the first call is the cold compile (a fresh worker, the
compiler's persistent cache a new, empty folder), the warm one the same first call in a second fresh process on
the folder the case filled, said with whether it came from the cache; jax-nojit keeps no cache (why is noted).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from dlperf.analysis.compare import COMPARED, NOT_COMPARED, compare_case
from dlperf.core.result import CaseResult
from dlperf.report.inference_report import _interval, latency
from dlperf.report.sections import Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_time

#: The studies drawn with this report.
STUDIES = ("compilers_xla", "compilers_xla_transformer")
#: The modes, in the order the tables list them.
MODES = ("jax", "jax-nojit", "tensorflow", "tensorflow-xla", "tensorflow-eager")
#: (mode, its baseline, what the speed-up is): the speed-up is the baseline's time per step over the mode's.
PAIRS = (("jax", "jax-nojit", "jit over no-jit"), ("tensorflow-xla", "tensorflow", "xla over graph"),
         ("tensorflow-xla", "tensorflow-eager", "xla over eager"), ("tensorflow", "tensorflow-eager",
                                                                    "graph over eager"))
#: Parameters named in a case's label even when every case has the same value.
ALWAYS = ("model", "task", "variant", "size")
#: Longest reason a note quotes from a comparison.
NOTE_CHARS = 240
#: Most pairs a note on missing speed-ups names.
MISSING_NAMED = 4

NOTE = ("speed-up: the baseline's time per step over the mode's, with its 95% interval (as `dlperf compare`); none "
        "where a side failed, was contended or invalid, or had too few samples. first call: the first step alone "
        "(tf.function's trace and, for tensorflow-xla, XLA's compile; jax's trace and compile; jax-nojit compiles "
        "no step, but JAX compiles each op once per shape as it dispatches it); for jax and tensorflow-xla it is the "
        "cold compile: a fresh worker whose persistent compiler cache (JAX's, XLA's via TF_XLA_FLAGS) is a new, "
        "empty folder, so it includes writing the executable there. warm compile: the same first call in a second "
        "fresh process on the folder the case filled (medians over repetitions); 'hit': every warm call's "
        "executable came from the cache (JAX's cache-hit events; TensorFlow: nothing written), 'no hit' else; "
        "jax-nojit compiles no step and keeps no persistent cache, tensorflow and tensorflow-eager compile nothing "
        "with XLA: no warm figure. break-even: the extra first-call time over the time a step saves (cold / warm: "
        "the mode's warm first call against the baseline's first call; the baselines keep no cache), only where "
        "the whole interval is a speed-up")

Group = tuple[str, str]  # (device, case label)


def _label(r: CaseResult, varying: set[str]) -> str:
    return " ".join(f"{k}={r.params[k]}" for k in sorted(r.params) if k in varying or k in ALWAYS)


def grouped(results: list[CaseResult]) -> dict[Group, dict[str, list[CaseResult]]]:
    """(device, case label) -> mode -> repetitions; the label names the parameters that vary over the run."""
    mine = [r for r in results if r.framework in MODES]
    values: dict[str, set[str]] = defaultdict(set)
    for r in mine:
        for k, v in r.params.items():
            values[k].add(repr(v))
    varying = {k for k, vs in values.items() if len(vs) > 1}
    by: dict[Group, dict[str, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in mine:
        by[(r.device, _label(r, varying))][r.framework].append(r)
    return {k: dict(v) for k, v in sorted(by.items())}


def first_call(rs: list[CaseResult]) -> float | None:
    """The median first-call time over the ok repetitions (None where none recorded one)."""
    values = [float(r.m.first_call_s) for r in rs if r.ok and r.m.first_call_s is not None]
    return statistics.median(values) if values else None


def warm_compile(rs: list[CaseResult]) -> float | None:
    """The median warm compile over the ok repetitions that recorded one (None where none did)."""
    values = [float(c["warm_s"]) for r in rs if r.ok for c in [r.m.get("compile") or {}] if c.get("warm_s") is not None]
    return statistics.median(values) if values else None


def warm_cell(rs: list[CaseResult], where: str, notes: list[str]) -> str:
    """The warm-compile cell: its median and whether the cache served it; why there is none goes to `notes`."""
    records = [c for r in rs if r.ok for c in [r.m.get("compile")] if c]
    warm = warm_compile(rs)
    for said in sorted({str(c[k]) for c in records for k in ("warm_error",) if c.get(k)}):
        notes.append(f"{where}: no warm compile: {said}")
    if warm is None:
        return f"{MISSING} (no cache)" if any(c.get("no_warm") for c in records) else MISSING
    hits = [bool(c.get("warm_hit")) for c in records if c.get("warm_s") is not None]
    return f"{format_time(warm)} ({'hit' if all(hits) else 'no hit'})"


def speedup(base: list[CaseResult], mode: list[CaseResult], what: str,
            missing: dict[str, list[str]]) -> tuple[str, float | None]:
    """(the speed-up cell, its interval's lower bound where the whole interval is above 1, else None); where there
    is none, `what` is added to `missing` under the reason."""
    cmp = compare_case(what, base, mode)
    if cmp.verdict not in COMPARED or cmp.ratio is None:
        said = (f"every process of a side was {cmp.verdict} (`dlperf show` gives each reason)"
                if cmp.verdict in NOT_COMPARED else cmp.label[:NOTE_CHARS])
        missing[said].append(what)
        return f"{MISSING} ({cmp.verdict})", None
    if cmp.ci_low is None or cmp.ci_high is None:
        return f"{1 / cmp.ratio:.2f}x (no interval)", None
    low, high = 1 / cmp.ci_high, 1 / cmp.ci_low
    return f"{1 / cmp.ratio:.2f}x ({low:.2f}-{high:.2f})", (low if low > 1 else None)


def times_table(groups: dict[Group, dict[str, list[CaseResult]]], notes: list[str]) -> Table:
    rows = []
    for (device, label), modes in groups.items():
        for name in [m for m in MODES if m in modes]:
            rs = modes[name]
            lat, failed = latency(rs), [r for r in rs if not r.ok]
            if failed:
                notes.append(f"{label} {device} {name}: {len(failed)} of {len(rs)} repetitions {failed[0].status}: "
                             f"{failed[0].reason or 'no reason stored'}")
            fc = first_call(rs)
            if lat is None:
                rows.append([label, device, name, f"{MISSING} ({failed[0].status if failed else 'not measured'})",
                             MISSING, MISSING, MISSING, "0"])
                continue
            rows.append([label, device, name, format_time(lat["median_s"]), _interval(lat),
                         format_time(fc) if fc is not None else MISSING, warm_cell(rs, f"{label} {device} {name}",
                                                                                 notes),
                         str(len([r for r in rs if r.ok]))])
    return Table("compiler modes: time per step and first call", ["case", "device", "mode", "median",
                 "95% interval", "first call (cold compile)", "warm compile", "processes"], rows,
                 heading="## Compiler modes: time per step", text_cols=(0, 1, 2))


def speedup_table(groups: dict[Group, dict[str, list[CaseResult]]], notes: list[str]) -> Table:
    rows: list[list[str]] = []
    missing: dict[str, list[str]] = defaultdict(list)
    for (device, label), modes in groups.items():
        for mode, base, what in PAIRS:
            if mode not in modes or base not in modes:
                continue
            cell, low = speedup(modes[base], modes[mode], f"{label} {device} {what}", missing)
            fc_mode, fc_base = first_call(modes[mode]), first_call(modes[base])
            lat_mode, lat_base = latency(modes[mode]), latency(modes[base])
            warm = warm_compile(modes[mode])
            even = even_warm = MISSING
            if low is not None and None not in (fc_mode, fc_base, lat_mode, lat_base):
                saved = lat_base["median_s"] - lat_mode["median_s"]  # type: ignore[index]
                even = break_even(fc_mode - fc_base, saved)  # type: ignore[operator]
                if warm is not None:
                    even_warm = break_even(warm - fc_base, saved)  # type: ignore[operator]
            firsts = " / ".join(format_time(v) if v is not None else MISSING for v in (fc_base, fc_mode))
            rows.append([label, device, what, cell, firsts, even, format_time(warm) if warm is not None
                         else MISSING, even_warm])
    for said, whats in missing.items():
        named = "; ".join(whats[:MISSING_NAMED]) + (f"; and {len(whats) - MISSING_NAMED} more"
                                                    if len(whats) > MISSING_NAMED else "")
        notes.append(f"no speed-up for {len(whats)} pair{'s' if len(whats) > 1 else ''} ({named}): {said}")
    return Table("compiler modes: speed-ups", ["case", "device", "speed-up", "x (95% interval)",
                 "first call (baseline / mode)", "break-even steps", "warm compile (mode)",
                 "break-even steps (warm)"], rows,
                 heading="## Compiler modes: speed-ups", text_cols=(0, 1, 2))


def break_even(extra_s: float, saved_s: float) -> str:
    """Steps until the time a step saves pays back the extra first-call time."""
    return "none (no extra first call)" if extra_s <= 0 else f"{extra_s / saved_s:,.0f}"


def sections(data: ReportData) -> list[Section]:
    groups = grouped(data.results)
    if not groups:
        return []
    notes: list[str] = []
    out: list[Section] = [times_table(groups, notes), speedup_table(groups, notes)]
    return out + [Note(n) for n in notes] + [Note(NOTE)]
