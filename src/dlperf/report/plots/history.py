"""History figures: per case group of a timeline, each case's median time per step with its 95% interval
against the run number (oldest first), change points and software changes marked (PNG and SVG through
`report.plots.save_figure`). Each case is drawn relative to the level of its first segment (the median of
its runs before its first change point; 1 = that time, named in the legend) on a linear axis: cases
microseconds and seconds apart share a figure, and a 5% step stays visible, which it would not on a log
axis spanning decades."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dlperf.analysis.history import CaseHistory, Timeline
from dlperf.analysis.machines import format_change
from dlperf.report.plots import save_figure
from dlperf.units import format_time

#: At most this many cases share one figure (more lines are not readable); a larger group is split.
CASES_PER_FIGURE = 8


def case_groups(cases: list[CaseHistory]) -> dict[str, list[CaseHistory]]:
    """Cases grouped by the first three parts of their key (workload/framework/device), in key order."""
    groups: dict[str, list[CaseHistory]] = {}
    for c in cases:
        groups.setdefault("/".join(c.case_key.split("/")[:3]), []).append(c)
    return groups


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "cases"


def history_figures(study: str, timeline: Timeline, out_dir: Path) -> list[tuple[str, list[Path]]]:
    """Write one figure per case group (split every CASES_PER_FIGURE cases); returns (group, files) pairs."""
    out: list[tuple[str, list[Path]]] = []
    for group, cases in case_groups(timeline.cases).items():
        for part in range(0, len(cases), CASES_PER_FIGURE):
            chunk = cases[part:part + CASES_PER_FIGURE]
            suffix = f"-{part // CASES_PER_FIGURE + 1}" if len(cases) > CASES_PER_FIGURE else ""
            stem = f"history-{_slug(study)}-{timeline.machine_id}-{_slug(group)}{suffix}"
            out.append((group + suffix, _figure(study, group, timeline, chunk, out_dir, stem)))
    return out


def _figure(study: str, group: str, timeline: Timeline, cases: list[CaseHistory], out_dir: Path,
            stem: str) -> list[Path]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    prefix = group + "/"
    for i, case in enumerate(cases):
        colour = colours[i % len(colours)]
        label = case.case_key.removeprefix(prefix) or case.case_key
        used = [p for p in case.points if p.usable and p.median_s]
        if not used or case.detection is None:
            continue
        ref = case.detection.levels[0]  # the level of the case's first segment: a step reads as +30%
        xs = [timeline.runs[p.run_index].number for p in used]
        ys = [p.median_s / ref for p in used]  # type: ignore[operator]
        lows = [(p.median_s - (p.ci_low_s if p.ci_low_s is not None else p.median_s)) / ref for p in used]  # type: ignore[operator]
        highs = [((p.ci_high_s if p.ci_high_s is not None else p.median_s) - p.median_s) / ref for p in used]  # type: ignore[operator]
        ax.errorbar(xs, ys, yerr=[lows, highs], color=colour, marker="o", ms=4, capsize=3, lw=1.2,
                    label=f"{label} (1 = {format_time(ref)})")
        left_out = [p for p in case.points if not p.usable and p.median_s]
        if left_out:
            ax.plot([timeline.runs[p.run_index].number for p in left_out], [p.median_s / ref for p in left_out],  # type: ignore[operator]
                    ls="none", marker="x", color=colour, alpha=0.6)
        for run in case.change_runs:
            ax.axvline(run - 0.5, color=colour, ls="--", lw=1.2, alpha=0.8)
    for run in timeline.runs:
        if run.changes:
            ax.axvline(run.number - 0.5, color="grey", ls=":", lw=1)
            text = format_change(*run.changes[0]) + (f" (+{len(run.changes) - 1})" if len(run.changes) > 1 else "")
            ax.annotate(text, (run.number - 0.5, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="right", fontsize=7, color="dimgrey")
    ax.set_xlim(0.5, len(timeline.runs) + 0.5)
    numbers = [r.number for r in timeline.runs]
    step = max(1, len(numbers) // 12)
    ax.set_xticks(numbers[::step])
    ax.set_xticklabels([f"#{r.number}\n{r.started_at:%m-%d}\n{r.started_at:%H:%M}" for r in timeline.runs][::step],
                       fontsize=7)
    ax.set_xlabel("run on this machine (oldest first; date and time UTC)")
    ax.set_ylabel("median time per step / its first level\n(95% interval)")
    ax.set_title(f"{study}: {group} on {timeline.label}\n"
                 "dashed: change point (PELT); dotted: software changed; x: left out (contended/invalid)",
                 fontsize=9)
    if ax.get_legend_handles_labels()[0]:  # none where no case of the group has a usable run (all left out)
        ax.legend(fontsize=7, loc="best")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


__all__ = ["CASES_PER_FIGURE", "case_groups", "history_figures"]
