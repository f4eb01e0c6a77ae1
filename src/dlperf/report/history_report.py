"""A study's history as report sections (terminal, Markdown, HTML draw them) and as JSON.

Per machine timeline: a heading naming the machine, the runs (with the software that changed before
each; a fleet run is marked as this machine's share of it), the series of medians per case (the newest
`SERIES_COLUMNS` runs), the newest run's check per case, the history figures, and how change points and
the check are computed."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from dlperf.analysis.changepoints import PENALTY_BETA, SIGMA_FLOOR
from dlperf.analysis.history import CaseHistory, NewestCheck, Point, RunInfo, StudyHistory, Timeline
from dlperf.analysis.machines import format_change
from dlperf.report.sections import Figure, Heading, Note, Section, Table
from dlperf.units import MISSING, format_time

#: The series table shows at most this many runs (the newest); the JSON and the figures hold them all.
SERIES_COLUMNS = 10
#: Marks in the series table (explained under it).
MARK_CHANGE, MARK_NOISY, MARK_LEFT_OUT = "»", "~", "!"
#: Under a runs table with a fleet run in it.
FLEET_NOTE = ("A fleet run's results came from several machines: this timeline holds only the cases this machine "
              "ran (each machine's share is a point on its own timeline, never pooled with another's).")


def history_sections(history: StudyHistory, *, plot_dir: Path | None = None) -> list[Section]:
    """Every timeline of `history` as sections; figures are drawn into `plot_dir` (None: no figures)."""
    out: list[Section] = []
    n = len(history.timelines)
    machines = f"{n} machine{'s' if n != 1 else ''}"
    out.append(Note(f"history of study {history.study}: {machines} (one timeline each, never merged); metric: "
                    "median time per step with its 95% interval", markdown=""))
    out.append(Heading(f"# History of study `{history.study}`",
                       intro=f"{machines}, one timeline each (never merged); metric: median time per step with "
                             "its 95% interval."))
    for t in history.timelines:
        out += _timeline_sections(history, t, plot_dir)
    out.append(Note(method_text(history), markdown=f"Method: {method_text(history)}"))
    if history.fail_pct is not None:
        failed = history.failures()
        names = ", ".join(f"{c.case_key} on {t.machine_id} ({c.newest.verdict})" for t, c in failed)
        out.append(Note(f"gate at +{history.fail_pct:g}%: " + (names if failed else "no regression")))
    return out


def method_text(history: StudyHistory) -> str:
    """How the change points and the newest run's check were computed (changepoints' and history's docs)."""
    return (f"Change points: PELT (ruptures), l2 cost on the log of each run's median, penalty {PENALTY_BETA:g} * "
            f"sigma^2 * log(n) with sigma the largest of the runs' own interval width, the spread of "
            f"run-to-run differences and {SIGMA_FLOOR:.1%}; a change is kept only when the levels on either side "
            f"differ by more than {history.min_effect:.0%}. The newest run is checked against the segment "
            f"before the last change point (earlier runs where there is none): slower/faster when the ratio "
            f"is beyond the threshold and the intervals do not overlap; contended or invalid processes are "
            f"left out.")


def _timeline_sections(history: StudyHistory, t: Timeline, plot_dir: Path | None) -> list[Section]:
    first, last = t.runs[0], t.runs[-1]
    span = f"{len(t.runs)} run{'s' if len(t.runs) != 1 else ''}, {first.started_at:%Y-%m-%d %H:%M} to " \
           f"{last.started_at:%Y-%m-%d %H:%M} UTC"
    fleet = any(r.machines > 1 for r in t.runs)
    out: list[Section] = [
        Heading(f"## Machine {t.machine_id}: {t.label}", intro=f"{t.identity}. {span}."),
        Note(f"machine {t.machine_id}: {t.label}; {span}", markdown=""),
        Note(f"  {t.identity}", markdown=""),
        Table(f"runs of {history.study} on machine {t.machine_id}",
              ["#", "run", "started (UTC)", "status", "software changed since the run before"],
              [[str(r.number), r.run_id, f"{r.started_at:%Y-%m-%d %H:%M:%S}", _status(r),
                "; ".join(format_change(*c) for c in r.changes) or ("first run" if r.number == 1 else "")]
               for r in t.runs], heading="### Runs", text_cols=(4,), intro=FLEET_NOTE if fleet else None),
    ]
    if fleet:
        out.append(Note(FLEET_NOTE, markdown=""))
    if not t.cases:
        return [*out, Note("no case results in these runs")]
    shown = t.runs[-SERIES_COLUMNS:]
    intro = (f"Median time per step per run (the newest {len(shown)} of {len(t.runs)}). {MARK_CHANGE}: a "
             f"change point starts here; {MARK_NOISY}: noisy; {MARK_LEFT_OUT}: left out (contended or invalid); "
             f"a failed case shows its status, {MISSING}: not in that run.")
    out.append(Table(f"median time per step, machine {t.machine_id}", ["case", *(f"#{r.number}" for r in shown)],
                     [[c.case_key, *(_cell(c, c.points[r.number - 1], r.number) for r in shown)] for c in t.cases],
                     heading="### Series", intro=intro))
    out.append(Note(intro, markdown=""))
    checked = [c for c in t.cases if c.newest.verdict != "not in newest run"]
    absent = len(t.cases) - len(checked)
    out.append(Table(f"newest run (#{last.number}) against its baseline, machine {t.machine_id}",
                     ["case", "runs", "newest [95% CI]", "baseline [typical CI] (runs)", "newest/baseline",
                      "change points", "verdict"],
                     [_check_row(c) for c in checked], heading="### Newest run", text_cols=(0,),
                     intro="Baseline: the segment before the last change point, or every earlier run."))
    if absent:
        out.append(Note(f"{absent} series not in the newest run (a case it did not run, or another thread count) "
                        f"{'is' if absent == 1 else 'are'} in the series table only"))
    if plot_dir is not None:
        from dlperf.report.plots.history import history_figures

        for group, paths in history_figures(history.study, t, plot_dir):
            out.append(Figure(paths, alt=f"history of {group} on machine {t.machine_id}", label="history plot",
                              heading=f"### {group}"))
    return out


def _status(r: RunInfo) -> str:
    """A run's status, and for a fleet run that this timeline holds only this machine's share of it."""
    return r.status if r.machines < 2 else f"{r.status} (fleet run, {r.machines} machines)"


def _cell(case: CaseHistory, p: Point, number: int) -> str:
    if p.status == "not run":
        return MISSING
    if p.median_s is None:
        return p.status
    mark = MARK_CHANGE if number in case.change_runs else ""
    if not p.usable:
        mark += MARK_LEFT_OUT
    return mark + format_time(p.median_s) + (MARK_NOISY if p.validity == "noisy" else "")


def _check_row(c: CaseHistory) -> list[str]:
    newest, check = c.points[-1], c.newest
    shown = newest.median_text()
    base = MISSING
    if check.baseline_median_s is not None:
        runs = _ranges(check.baseline_runs)
        base = (f"{format_time(check.baseline_median_s)} [{format_time(check.baseline_low_s)}, "
                f"{format_time(check.baseline_high_s)}] (#{runs})")
    ratio = f"{check.ratio:.3f}" if check.ratio is not None else MISSING
    effects = c.detection.effects if c.detection else []
    changes = ", ".join(f"#{run} {e:+.0%}" for run, e in zip(c.change_runs, effects, strict=True)) or "none"
    verdict = check.verdict + (" (REGRESSION)" if check.regression and check.verdict == "slower" else "")
    if check.verdict == "could not check":  # the whole reason is in the JSON
        verdict += f" (newest: {newest.validity or newest.status})"
    return [c.case_key, str(sum(1 for p in c.points if p.usable)), shown, base, ratio, changes, verdict]


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, #5' (after a leading '#')."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", #".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


class CellDoc(TypedDict):
    """A case's point in one run as JSON (`analysis.history.Point`'s fields in their order, but its run index)."""

    status: str
    median_s: float | None
    ci_low_s: float | None
    ci_high_s: float | None
    validity: str | None
    processes: int
    usable: bool
    reason: str | None
    canary_s: float | None


class PointDoc(CellDoc):
    """A point on a timeline: the run's number (written first) and the point's fields."""

    run: int


class NewestDoc(TypedDict):
    """`analysis.history.NewestCheck` as JSON (its fields in their order)."""

    verdict: str
    regression: bool
    ratio: float | None
    baseline_runs: list[int]
    baseline_median_s: float | None
    baseline_low_s: float | None
    baseline_high_s: float | None
    reason: str


class ChangeDoc(TypedDict):
    """A software field that changed at a run: its name, the value before and after."""

    field: str
    old: str | None
    new: str | None


class HistoryRunDoc(TypedDict):
    number: int
    run_id: str
    started_at: str  # ISO 8601
    status: str
    machines: int
    software: dict[str, str]
    changes: list[ChangeDoc]


class HistoryCaseDoc(TypedDict):
    case_key: str
    points: list[PointDoc]
    change_runs: list[int]
    change_effects: list[float]
    noise_sigma_log: float | None
    penalty: float | None
    newest: NewestDoc


class TimelineDoc(TypedDict):
    machine_id: str
    label: str
    identity: str
    runs: list[HistoryRunDoc]
    cases: list[HistoryCaseDoc]


class RegressionDoc(TypedDict):
    machine_id: str
    case_key: str
    verdict: str
    reason: str


class HistoryDoc(TypedDict):
    """What `dlperf history --format json` writes (and its HTML page embeds)."""

    study: str
    metric: str
    min_effect_pct: float
    fail_on_regression_pct: float | None
    method: str
    timelines: list[TimelineDoc]
    regressions: list[RegressionDoc]


def cell_doc(p: Point) -> CellDoc:
    """A point's fields as JSON, its run index left out (the caller says which run it is, if anyone asks)."""
    return {"status": p.status, "median_s": p.median_s, "ci_low_s": p.ci_low_s, "ci_high_s": p.ci_high_s,
            "validity": p.validity, "processes": p.processes, "usable": p.usable, "reason": p.reason,
            "canary_s": p.canary_s}


def _newest_doc(n: NewestCheck) -> NewestDoc:
    return {"verdict": n.verdict, "regression": n.regression, "ratio": n.ratio,
            "baseline_runs": list(n.baseline_runs), "baseline_median_s": n.baseline_median_s,
            "baseline_low_s": n.baseline_low_s, "baseline_high_s": n.baseline_high_s, "reason": n.reason}


def history_json(history: StudyHistory) -> HistoryDoc:
    """Everything the history holds, as plain JSON data (datetimes as ISO text)."""
    def timeline(t: Timeline) -> TimelineDoc:
        return {
            "machine_id": t.machine_id, "label": t.label, "identity": t.identity,
            "runs": [{"number": r.number, "run_id": r.run_id, "started_at": r.started_at.isoformat(),
                      "status": r.status, "machines": r.machines, "software": r.software,
                      "changes": [{"field": k, "old": a, "new": b} for k, a, b in r.changes]} for r in t.runs],
            "cases": [{"case_key": c.case_key,
                       "points": [{"run": t.runs[p.run_index].number, **cell_doc(p)} for p in c.points],
                       "change_runs": c.change_runs,
                       "change_effects": c.detection.effects if c.detection else [],
                       "noise_sigma_log": c.detection.sigma if c.detection else None,
                       "penalty": c.detection.penalty if c.detection else None,
                       "newest": _newest_doc(c.newest)} for c in t.cases],
        }

    return {"study": history.study, "metric": history.metric, "min_effect_pct": history.min_effect * 100,
            "fail_on_regression_pct": history.fail_pct, "method": method_text(history),
            "timelines": [timeline(t) for t in history.timelines],
            "regressions": [{"machine_id": t.machine_id, "case_key": c.case_key, "verdict": c.newest.verdict,
                             "reason": c.newest.reason} for t, c in history.failures()]}


__all__ = ["FLEET_NOTE", "SERIES_COLUMNS", "CellDoc", "HistoryDoc", "cell_doc", "history_json", "history_sections",
           "method_text"]
