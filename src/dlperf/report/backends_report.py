"""The `backends` study's report (study 003): time per step and per epoch, the speedup matrix, the profile."""

from __future__ import annotations

from dlperf.core.result import CaseResult
from dlperf.report.sections import Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.timing import format_time
from dlperf.units import format_pct

PAIRS = (("nn-sequential", "nn-vectorized"), ("nn-sequential", "nn-cuda"), ("nn-vectorized", "nn-cuda"),
         ("nn-sequential", "torch"), ("nn-vectorized", "torch"), ("nn-cuda", "torch"), ("nn-cuda", "nn-cuda-cublas"))


def _by_model(results: list[CaseResult]) -> dict[str, dict[str, CaseResult]]:
    out: dict[str, dict[str, CaseResult]] = {}
    for r in results:
        if r.workload == "backends" and r.ok:
            out.setdefault(r.params["model"], {})[r.framework] = r
    return out


def _tables(results: list[CaseResult]) -> list[tuple[str, list[str], list[list[str]]]]:
    models = _by_model(results)
    if not models:
        return []
    times_h = ["model", "backend", "time/step (median)", "IQR", "steps timed", "time/epoch (derived)"]
    times = []
    for model, fws in sorted(models.items()):
        for fw, r in sorted(fws.items()):
            m = r.m
            times.append([model, fw, format_time(m.median_s), format_pct(m.iqr_rel), str(m.total_iters),
                          f"{format_time(m.time_per_epoch_s_derived)} ({m.steps_per_epoch} steps x median)"])
    sp_h = ["model", *[f"{a} / {b}" for a, b in PAIRS]]
    sp = []
    for model, fws in sorted(models.items()):
        row = [model]
        for a, b in PAIRS:
            if a in fws and b in fws:
                row.append(f"{fws[a].m.median_s / fws[b].m.median_s:.3g}")
            else:
                row.append("-")
        sp.append(row)
    out = [("time per training step; per epoch derived from the per-step median", times_h, times),
           ("speedup matrix: time per step of a / time per step of b (above 1: b is faster; '-': one did not run)",
            sp_h, sp)]
    for model, fws in sorted(models.items()):
        for fw in ("nn-vectorized", "nn-sequential"):
            prof = fws[fw].m.profile if fw in fws else None
            if prof:
                rows = [[p["function"], str(p["ncalls"]), f"{p['inclusive_s'] * 1e3:.2f}", f"{p['self_s'] * 1e3:.2f}"]
                        for p in prof["by_inclusive"][:10]]
                out.append((f"cProfile of fit ({model}, {fw}, a few batches, {prof['total_s'] * 1e3:.1f} ms): "
                            "top by inclusive time", ["function", "calls", "inclusive ms", "self ms"], rows))
                rows = [[p["function"], str(p["ncalls"]), f"{p['self_s'] * 1e3:.2f}", f"{p['inclusive_s'] * 1e3:.2f}"]
                        for p in prof["by_self"][:10]]
                out.append((f"cProfile of fit ({model}, {fw}): top by self time",
                            ["function", "calls", "self ms", "inclusive ms"], rows))
    return out


def steps_timed(counts: list[int | None]) -> str:
    """How many steps each case was timed on, as whole counts: `12 steps`, or `12 to 13 steps per case`."""
    known = sorted(int(n) for n in counts if n)
    if not known:
        return "an unknown number of steps"
    lo, hi = known[0], known[-1]
    return f"{lo} step{'s' * (lo != 1)}" if lo == hi else f"{lo} to {hi} steps per case"


def sections(data: ReportData) -> list[Section]:
    """Study 003's layout: time per step and per epoch, the speedup matrix, the profile of `fit`."""
    out: list[Section] = [Table(title, header, rows, heading=f"### {title}") for title, header, rows in
                          _tables(data.results)]
    seq = [r for r in data.results if r.framework == "nn-sequential" and r.ok]
    if data.of("backends") and seq:
        out.append(Note(f"nn-sequential was timed on {steps_timed([r.m.total_iters for r in seq])}, not whole "
                        "epochs: its per-epoch time is the per-step median times the steps of an epoch", markdown=""))
    return out
