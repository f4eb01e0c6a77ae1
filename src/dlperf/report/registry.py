"""The study reports, by workload or study name: each turns a run's `ReportData` into sections (`report.sections`).

Adding a report is one module with a `sections(data) -> list[Section]` function and one line: in `report.views`'
`VIEWS` by workload (drawn for a run with cases of it), or here in `STUDIES` by study name for a study that spans
workloads (`inference`: the cnn and transformer inference cases), drawn for a run of that study. `run` and `report` draw
the same sections, after the run table, in this order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dlperf.analysis.machines import MachineShare, share_names
from dlperf.report import compiler_modes_report, inference_report, serving_report
from dlperf.report.sections import Heading, Note, Section
from dlperf.report.study import ReportData
from dlperf.report.views import VIEWS

#: The study report of each workload that has one, by name (its view's sections: `report.views`).
REPORTS: dict[str, Callable[[ReportData], list[Section]]] = {name: v.sections for name, v in VIEWS.items()}
#: Reports of studies that span workloads, by study name: drawn for a run of that study (after the workloads'
#: reports, unless one of them is the same report).
STUDIES: dict[str, Callable[[ReportData], list[Section]]] = {
    "serving": serving_report.sections,
    inference_report.STUDY: inference_report.sections,
    "inference_transformer": inference_report.sections,
    **{name: compiler_modes_report.sections for name in compiler_modes_report.STUDIES},
}


def study_sections(data: ReportData) -> list[Section]:
    """The sections of every study report whose workload the run has, then the report of the run's study where
    `STUDIES` has one (plots written to data.plot_dir), each report once; a workload's report is followed by a
    line naming the cases behind its figures that were not valid (ops marks them in its tables). Where the
    study's report is drawn too (the `inference` study's tables are of cnn and transformer cases), those lines
    come after it, so that "the figures above" are above them."""
    present = {r.workload for r in data.results}
    study = STUDIES.get(str(data.run.study))
    defer = study is not None and study not in [build for w, build in REPORTS.items() if w in present]
    out: list[Section] = []
    notes: list[Section] = []
    for workload, build in REPORTS.items():
        if workload in present:
            out += build(data)
            if VIEWS[workload].validity_note:
                (notes if defer else out).extend(validity_note(workload, data))
    if defer and study is not None:
        out += study(data)
    return out + notes


def machine_sections(data: ReportData, per_machine: Sequence[tuple[MachineShare, ReportData]] = ()) -> list[Section]:
    """A run's study sections: `study_sections(data)` for a run on one machine (`per_machine` empty); for a run
    on several (a fleet run), each machine's report on its own results and environment (`cli.readers.
    machine_reports`), under a heading naming the machine as the run table's machine column does: a figure
    that compares cases (a speed-up, a scaling efficiency, a roofline's ceilings) never mixes two machines."""
    if len(per_machine) < 2:
        return study_sections(data)
    names = share_names([share for share, _ in per_machine])
    out: list[Section] = [Note(f"this run's results came from {len(per_machine)} machines: each machine's study "
                               "report follows on its own (its results, its environment), never pooled")]
    for share, share_data in per_machine:
        title = f"machine {names[share.env_ids[0]]}: {share.describe()}"
        out += [Heading(f"## {title}"), Note(title, markdown="")]
        out += study_sections(share_data) or [Note("no study report for this machine's results")]
    return out


#: The most characters of case keys the validity line names; longer keys (a ddp case's) are left to `dlperf show`.
VALIDITY_NAMES_CHARS = 240


def validity_note(workload: str, data: ReportData) -> list[Section]:
    """One line: how many of the workload's measured cases were noisy, contended or invalid, and which."""
    bad = [r for r in data.of(workload) if r.ok and r.m.validity not in (None, "valid")]
    if not bad:
        return []
    counts: dict[str, int] = {}
    for r in bad:
        counts[str(r.m.validity)] = counts.get(str(r.m.validity), 0) + 1
    names = ", ".join(sorted({r.case_key.split("/", 1)[-1] for r in bad})[:6])
    which = f" ({names}{', ...' if len(bad) > 6 else ''})" if len(names) <= VALIDITY_NAMES_CHARS else ""
    text = (f"validity: {', '.join(f'{n} {v}' for v, n in counts.items())} of the {workload} figures above"
            f"{which}; `dlperf show` gives each reason")
    return [Note(text)]
