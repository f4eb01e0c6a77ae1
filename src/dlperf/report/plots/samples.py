"""Box plots of the raw samples: every stored per-call time of each case, one box per case (and repetition).

A median hides what the samples did; a box of all of them shows the spread, the outliers and a second
cluster at a glance. Cases are grouped per workload and device (one scale per figure) and split into
figures of at most `MAX_BOXES` boxes, so a run of 1,000 cases stays readable. Horizontal boxes: the case
names sit on the y axis in full. Each box carries an SVG <title> (its case, median and IQR), shown as a
tooltip where the SVG is inlined (the HTML report).
"""

from __future__ import annotations

import html
import re
import statistics
import warnings
from collections import defaultdict
from pathlib import Path

from dlperf.core.result import CaseResult
from dlperf.report.plots import _pyplot, log_scale, save_figure
from dlperf.report.sections import Figure, Note, Section
from dlperf.timing.measurement import Measurement
from dlperf.units import format_time

#: The most boxes one figure holds (more: the next figure of the same group).
MAX_BOXES = 40
#: Medians spread over more than this ratio (largest / smallest): a log time axis.
LOG_SPREAD = 20.0
_GID = "dlperf-box-{}"


def per_call_times(r: CaseResult) -> list[float]:
    """A result's raw per-call times in sample order (sample time / its iterations); [] without samples."""
    if not r.measurement or not r.measurement.get("sample_times_s"):
        return []
    try:
        return list(Measurement.from_dict(r.measurement).times_s)
    except (KeyError, TypeError, ValueError):
        return []


def box_label(r: CaseResult) -> str:
    """The case as the axis shows it: its key without the workload, with its repetition (mathtext off)."""
    key = r.case_key.split("/", 1)[-1] if r.case_key.startswith(f"{r.workload}/") else r.case_key
    rep = f" #{r.repetition}" if r.repetition else ""
    return (key + rep).replace("$", r"\$")


def groups(results: list[CaseResult]) -> dict[tuple[str, str], list[tuple[CaseResult, list[float]]]]:
    """Results with samples, by (workload, device), in stored order."""
    out: dict[tuple[str, str], list[tuple[CaseResult, list[float]]]] = defaultdict(list)
    for r in results:
        times = per_call_times(r)
        if times:
            out[(r.workload, r.device)].append((r, times))
    return out


def sample_sections(results: list[CaseResult], out_dir: Path, stem: str) -> list[Section]:
    """One Figure per chunk of at most MAX_BOXES boxes (SVG only: it is drawn for the HTML report), and a
    Note naming the cases that have no samples to draw (failed, skipped)."""
    out: list[Section] = []
    for (workload, device), items in groups(results).items():
        chunks = [items[i:i + MAX_BOXES] for i in range(0, len(items), MAX_BOXES)]
        for k, chunk in enumerate(chunks, 1):
            part = f" (part {k} of {len(chunks)})" if len(chunks) > 1 else ""
            title = f"{workload} on {device}: per-call time of every sample{part}"
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{stem}-{workload}-{device}-{k}")
            paths = box_plot(chunk, out_dir, safe, title)
            out.append(Figure(paths, f"box plot of raw samples, {workload} on {device}{part}",
                              heading=f"### {workload} on {device}{part}"))
    missing = [r for r in results if not per_call_times(r)]
    if missing:
        counts: dict[str, int] = defaultdict(int)
        for r in missing:
            counts[r.status] += 1
        how = ", ".join(f"{n} {status}" for status, n in counts.items())
        out.append(Note(f"no samples to draw for {len(missing)} case(s) ({how}): each is listed with its reason "
                        "under the validity and noise flags"))
    return out


def box_plot(items: list[tuple[CaseResult, list[float]]], out_dir: Path, stem: str, title: str) -> list[Path]:
    """Horizontal boxes (whiskers at 1.5 IQR, outliers as dots) of each case's per-call times; the median
    of each printed at its right. Writes STEM.svg with a <title> on each box; returns [path]."""
    plt = _pyplot()
    medians = [statistics.median(t) for _, t in items]
    lo, hi = min(min(t) for _, t in items), max(max(t) for _, t in items)
    log = min(medians) > 0 and max(medians) / min(medians) > LOG_SPREAD
    n = len(items)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.26 * n))
    data = [t for _, t in reversed(items)]  # first case at the top
    bp = ax.boxplot(data, orientation="horizontal", widths=0.6, patch_artist=True, showfliers=True,
                    medianprops={"color": "black", "lw": 1.2},
                    boxprops={"facecolor": "#cfe0f3", "edgecolor": "#2f5d8a"},
                    flierprops={"marker": "o", "markersize": 2.5, "markerfacecolor": "#2f5d8a",
                                "markeredgecolor": "none", "alpha": 0.6})
    tips: dict[str, str] = {}
    for i, (box, (r, times)) in enumerate(zip(bp["boxes"], reversed(items), strict=True)):
        gid = _GID.format(i)
        box.set_gid(gid)
        m = Measurement.from_dict(r.measurement or {})
        tips[gid] = (f"{r.case_key}{f' #{r.repetition}' if r.repetition else ''}: median {format_time(m.median_s)}, "
                     f"IQR {m.iqr_rel:.1%} of the median, {len(times)} samples, validity {r.m.validity or 'unknown'}")
    ax.set_yticks(range(1, n + 1), [box_label(r) for r, _ in reversed(items)], fontsize=8)
    if log:
        log_scale(ax, "x")
    ax.set_xlim(lo / 1.3 if log else 0, hi * (1.6 if log else 1.12))
    for y, (_, times) in enumerate(reversed(items), 1):
        ax.annotate(format_time(statistics.median(times)), (max(times), y), xytext=(4, -3),
                    textcoords="offset points", fontsize=7, color="0.3")
    ax.set_xlabel("seconds per call (each sample: its block's time / its calls)" + ("; log scale" if log else ""))
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(True, axis="x", which="both", alpha=0.25)
    with warnings.catch_warnings():  # very long case keys: the layout is left as is, not warned about on stderr
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout()
    paths = save_figure(fig, out_dir, stem, formats=("svg",))
    add_titles(paths[0], tips)
    return paths


def add_titles(svg_path: Path, tips: dict[str, str]) -> None:
    """Put an SVG <title> (a tooltip) as the first child of each element whose id is a key of `tips`."""
    text = svg_path.read_text()
    for gid, tip in tips.items():
        text = text.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(tip)}</title>', 1)
    svg_path.write_text(text)
