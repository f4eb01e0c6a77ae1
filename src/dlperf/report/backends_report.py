"""The `backends` study's report (study 003): time per step and per epoch, the speedup matrix, the profile."""

from __future__ import annotations

from dlperf.analysis.picking import CannotCheck, Trail, on_device, times
from dlperf.core.result import CaseResult
from dlperf.report.plots.paper import speedup_plot
from dlperf.report.sections import Figure, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.studies import paper
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


def claim_time(results: list[CaseResult], model: str, framework: str) -> tuple[float | None, str]:
    """The time per step the 003 claims judge: the median over repetitions of the ok, not invalid cases of
    this backend and model on its device, picked as the claims pick (`analysis.picking`); None and why where
    there is none."""
    device = "cuda" if framework.startswith("nn-cuda") else "cpu"
    ok = [r for r in results if r.workload == "backends" and r.ok and r.framework == framework
          and r.params.get("model") == model and on_device(r, device)]
    good = Trail().take(ok)
    if ok and not good:
        return None, f"missing here: {framework} has only invalid measurements"
    if not good:
        return None, _why_missing(results, model, framework)
    try:
        return times(good), ""
    except CannotCheck as exc:
        return None, f"missing here: {exc}"


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
    for model in sorted(models):
        row = [model]
        for a, b in PAIRS:  # the figures the claims judge: medians over repetitions, invalid cases left out
            ta, tb = claim_time(results, model, a)[0], claim_time(results, model, b)[0]
            row.append(f"{ta / tb:.3g}" if ta is not None and tb else "-")
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


#: The study's backend names and this project's frameworks that implement them.
PAPER_BACKENDS = {"sequential": "nn-sequential", "vectorized": "nn-vectorized", "cuda": "nn-cuda"}
PAPER_PAIRS = (("sequential", "vectorized"), ("sequential", "cuda"), ("vectorized", "cuda"))


def _why_missing(results: list[CaseResult], model: str, framework: str) -> str:
    """Why this run has no time of `framework` on `model`: a case that did not finish, or none at all."""
    mine = [r for r in results if r.workload == "backends" and r.params.get("model") == model
            and r.framework == framework]
    if mine:
        r = mine[0]
        reason = (r.reason or "").splitlines()[0][:80] if r.reason else ""
        return f"missing here: {framework} {r.status}" + (f" ({reason})" if reason else "")
    gpu = " (it needs a GPU)" if framework.startswith("nn-cuda") else ""
    return f"missing here: no {framework} case in this run{gpu}"


def paper_speedups(results: list[CaseResult]) -> tuple[list[str], list[list[str]], list[tuple[str, float | None,
                                                                                            float | None]]]:
    """Study 003's speedup matrix (Figures 5(b) and 6) beside this run's, per model and pair; and the plot's
    points (label, paper, this run)."""
    ref = paper.load("study003_speedups")
    header = ["model", "speedup (time a / time b)", "paper", "where in the paper", "this run"]
    rows, points = [], []
    for model in ("mlp", "cnn"):
        for a, b in PAPER_PAIRS:
            quoted = ref.where(model=model, numerator=a, denominator=b)
            paper_value = float(quoted[0]["speedup"]) if quoted else None
            where = quoted[0]["where"] if quoted else (
                "not measured by the paper (Figure 6: sequential too slow)" if model == "cnn" else "not printed")
            (ta, why_a), (tb, why_b) = (claim_time(results, model, PAPER_BACKENDS[x]) for x in (a, b))
            mine = ta / tb if ta is not None and tb else None
            cell = f"{mine:.3g}" if mine is not None else (why_a or why_b or "missing here: a time of zero")
            rows.append([model, f"{a} / {b}", quoted[0]["speedup"] if quoted else "-", where, cell])
            points.append((f"{model}: {a} / {b}", paper_value, mine))
    return header, rows, points


def sections(data: ReportData) -> list[Section]:
    """Study 003's layout: time per step and per epoch, the speedup matrix, the profile of `fit`."""
    out: list[Section] = [Table(title, header, rows, heading=f"### {title}") for title, header, rows in
                          _tables(data.results)]
    seq = [r for r in data.results if r.framework == "nn-sequential" and r.ok]
    if data.of("backends") and seq:
        out.append(Note(f"nn-sequential was timed on {steps_timed([r.m.total_iters for r in seq])}, not whole "
                        "epochs: its per-epoch time is the per-step median times the steps of an epoch", markdown=""))
    if data.of("backends"):
        out += paper_sections(data)
    return out


def paper_sections(data: ReportData) -> list[Section]:
    """Study 003's printed speedups beside this run's: a table and a bar chart (the paper hatched)."""
    ref = paper.load("study003_speedups")
    header, rows, points = paper_speedups(data.results)
    out: list[Section] = [Table("study 003 speedups as published (its own library, PyCUDA, 2017) beside this run's",
                                header, rows, heading="### Study 003 as published, beside this run",
                                intro=f"Paper: {ref.citation}", text_cols=(3, 4)),
                          Note(f"paper: {ref.citation}", markdown="")]
    paths = speedup_plot(points, data.plot_dir, f"speedups-{data.run.id}")
    if paths:
        out.append(Figure(paths, "study 003 speedups, paper (hatched) and this run (solid)",
                          label="speedup plot (paper hatched, this run solid)"))
    return out
