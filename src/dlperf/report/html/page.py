"""One self-contained HTML page for one or more runs: a table of contents and a summary of the runs, then per
run its table, its study sections, box plots of the raw samples, validity and noise flags, the environment
and the commands that reproduce it; after the runs the verdicts on the papers' claims (those on studies no
run here includes folded under one line naming the command that would check them), and the raw data as JSON
at the end. The runs' own results lead: a newcomer's first screen is what they ran, not what they did not.

Nothing on the page is fetched: the stylesheet and the script are read from this package's templates/
and inlined, figures are inline SVG (or a PNG as a data: URI), fonts are the system's. Jinja2 draws it
with autoescape on, so every string from a study file, an environment or a stored error is escaped.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from markupsafe import Markup

from dlperf.analysis.machines import MachineShare, share_names
from dlperf.report.history_report import HistoryDoc
from dlperf.report.html import parts
from dlperf.report.html.commands import reproduce
from dlperf.report.html.embed import SCRIPT_ID, document, script_json
from dlperf.report.html.render import Block, TableBlock, blocks, jinja_env, render_blocks, table_block
from dlperf.report.html.svg import WEB_ADDRESS
from dlperf.report.matrix import MatrixDoc
from dlperf.report.plots.samples import sample_sections
from dlperf.report.registry import machine_sections
from dlperf.report.sections import Section
from dlperf.report.study import ReportData
from dlperf.report.tables import FAILED
from dlperf.report.verdict import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS, STUDY_WORKLOADS, VERDICTS, Verdict

#: A verdict's row class (the stylesheet colours it).
VERDICT_CLASS = {HOLDS: "verdict-holds", DOES_NOT_HOLD: "verdict-fails", CANNOT_CHECK: "verdict-cannot"}


def _asset(name: str) -> str:
    return resources.files("dlperf.report.html").joinpath("templates", name).read_text(encoding="utf-8")


def unreached(v: Verdict, workloads: Collection[str]) -> bool:
    """Whether no run here can touch this claim: it cannot be checked, and none of the runs holds a case of its
    study's workload (a claim on the catalog, judged without runs, is never one)."""
    workload = STUDY_WORKLOADS.get(v.study)
    return v.verdict == CANNOT_CHECK and workload is not None and workload not in workloads


def _verdict_table(verdicts: list[Verdict]) -> TableBlock:
    rows = [[v.claim_id, v.study, v.text, v.quantity, v.paper, v.measured if v.measured is not None else "-",
             v.verdict, v.detail] for v in verdicts]
    return table_block(["claim", "study", "claim (as the paper states it)", "quantity", "paper", "this run",
                        "verdict", "detail"], rows, text_cols=(2, 3, 4, 5, 7),
                       row_classes=[VERDICT_CLASS[v.verdict] for v in verdicts])


def verdict_blocks(verdicts: list[Verdict], left_out: Sequence[str] = (), *, workloads: Collection[str] = (),
                   n_runs: int = 1) -> list[Block]:
    """The verdicts as one table coloured by verdict, with their counts; a line when there are none; a line
    naming the runs on several machines the claims were not judged on (`left_out`), and how to judge them.
    Claims on studies whose workload none of the runs holds (`workloads`: those of every case on the page) are
    folded under one line naming the `dlperf run STUDY` commands that would check them (`n_runs`: the runs on
    the page, for the line's wording); every other claim keeps its row in view."""
    out: list[Block] = [{"kind": "p", "text": f"Not judged: {', '.join(left_out)} ran on several machines, and a claim "
                                              "is never judged on two machines' results pooled; `dlperf verdicts "
                                              "RUN@MACHINE` judges one machine's share."}] if left_out else []
    if not verdicts:
        return out + [{"kind": "p", "text": "No verdicts: the claims of the seed studies gave none for these runs "
                                            "(no claim is checked against them)."}]
    counts = ", ".join(f"{sum(v.verdict == k for v in verdicts)} {k}" for k in VERDICTS
                       if any(v.verdict == k for v in verdicts))
    out.append({"kind": "p", "text": f"{len(verdicts)} claims: {counts}."})
    folded = [v for v in verdicts if unreached(v, workloads)]
    shown = [v for v in verdicts if not unreached(v, workloads)]
    if shown:
        out.append(_verdict_table(shown))
    if folded:
        studies = list(dict.fromkeys(v.study for v in folded))
        commands = ", ".join(f"`dlperf run {s}`" for s in studies)
        n = len(folded)
        kind = "a study" if len(studies) == 1 else "studies"
        runs = "this run does" if n_runs == 1 else "these runs do"
        line = (f"{n} claim{'s' if n != 1 else ''} on {', '.join(studies)}, {kind} {runs} not include: cannot "
                f"check here; {commands} would check {'them' if n != 1 else 'it'} (each row gives the exact options).")
        out.append({"kind": "fold", "summary": line, "html": render_blocks([_verdict_table(folded)])})
    return out


def overview_blocks(datas: list[ReportData], machines: dict[str, Sequence[MachineShare]] | None = None
                    ) -> list[TableBlock]:
    """One row per run: what it is, how it ended, how its cases fared, and where it ran (a run on several
    machines: how many, and their names as its table's machine column gives them)."""
    rows, classes = [], []
    for d in datas:
        names = share_names((machines or {}).get(d.run.id) or [])
        res = d.results
        ok = sum(r.ok for r in res)
        failed = sum(r.status in FAILED for r in res)
        flagged = sum(r.ok and r.m.validity not in (None, "valid") for r in res)
        gpus = ", ".join(str(g.get("name")) for g in d.env.get("gpus") or []) or "no GPU"
        where = (f"{len(set(names.values()))} machines: {', '.join(sorted(set(names.values())))}" if names
                 else f"{d.env.get('cpu_model')}; {gpus}")
        started = d.run.started_at
        rows.append([str(d.run.id), f"{d.run.study} ({d.run.variant})", str(d.run.status),
                     f"{len(res)}/{d.run.n_cases}", str(ok), str(failed), str(flagged),
                     where, f"{started:%Y-%m-%d %H:%M} UTC" if isinstance(started, datetime) else str(started)])
        classes.append("st-error" if failed else "")
    return [table_block(["run", "study", "status", "stored", "ok", "failed", "not valid", "machine",
                         "started"], rows, text_cols=(7,), row_classes=classes)]


def run_part(index: int, data: ReportData, history: list[Section] | None = None,
             machines: Sequence[MachineShare] | None = None,
             per_machine: Sequence[tuple[MachineShare, ReportData]] = ()) -> dict[str, Any]:
    """One run's part of the page: its id for links, its title, and each subsection's HTML (`history`: the
    study's timeline on each of this run's machines, when the store holds other runs of it there; `machines`:
    the run's shares by machine, a machine column and every machine's environment where there are several;
    `per_machine`: a run on several machines, each one's report data (`cli.readers.machine_reports`), its
    study report drawn once per machine)."""
    anchor = f"run-{index}"
    commands, caveats = reproduce(data.run, data.env)
    study = blocks(machine_sections(data, per_machine), prefix=f"r{index}s")
    samples = blocks(sample_sections(data.results, data.plot_dir, f"samples-{data.run.id}"), prefix=f"r{index}b")
    subsections = [
        ("results", "Results", parts.run_table_blocks(data.run, data.results, machines)),
        ("study", "Study report", study or [{"kind": "p", "text": "no study report for this run's workloads"}]),
        ("samples", "Raw samples per case", samples),
        ("flags", "Validity and noise flags", parts.flag_blocks(data.results)),
        ("env", "Environment", parts.environment_blocks(data.env, machines)),
    ]
    if history:
        where = "its machines" if share_names(machines or []) else "this machine"
        subsections.append(("history", f"History of this study on {where}", blocks(history, prefix=f"r{index}h")))
    return {"anchor": anchor, "run": data.run,
            "title": f"Run {data.run.id}: study {data.run.study} ({data.run.variant})",
            "subsections": [{"anchor": f"{anchor}-{key}", "title": title, "html": render_blocks(items)}
                            for key, title, items in subsections],
            "commands": commands, "caveats": caveats}


def _page(template: str, title: str, doc: dict[str, Any] | HistoryDoc | MatrixDoc, generated_at: datetime,
          **parts: Any) -> str:
    """A template of base.html.j2 drawn with what every page shares (title, time, version, the inline style
    and script, `doc` as the embedded JSON); any web address left in a stored string made plain text."""
    from dlperf import __version__

    page = jinja_env().get_template(template).render(
        title=title, generated=f"{generated_at:%Y-%m-%d %H:%M} UTC", version=__version__,
        style=Markup(_asset("style.css")), script=Markup(_asset("page.js")), data_id=SCRIPT_ID,
        data=Markup(script_json(doc)), **parts)
    return WEB_ADDRESS.sub(r"\1&#58;", page)  # a URL in a stored string is text, never a reference


def render_page(datas: list[ReportData], verdicts: list[Verdict], *, generated_at: datetime | None = None,
                histories: dict[str, list[Section]] | None = None,
                machines: dict[str, Sequence[MachineShare]] | None = None,
                per_machine: dict[str, Sequence[tuple[MachineShare, ReportData]]] | None = None) -> str:
    """The whole page for these runs (at least one) and the verdicts on them, as one HTML string
    (`histories`: by run id, the sections of its study's history on its machines; `machines`: by run id, its
    results by the machine that ran them, `cli.readers.run_machines`; None: each run on its own machine;
    `per_machine`: by run id, a run on several machines' report data per machine, `cli.readers.
    machine_reports`: its study report per machine, and the verdicts say it was not judged)."""
    if not datas:
        raise ValueError("render_page needs at least one run")
    when = generated_at or datetime.now(UTC)
    shares = machines or {}
    several = per_machine or {}
    runs = [run_part(i, d, (histories or {}).get(d.run.id), shares.get(d.run.id), several.get(d.run.id, ()))
            for i, d in enumerate(datas, 1)]
    title = f"dlperf report: run {datas[0].run.id}" if len(datas) == 1 else f"dlperf report: {len(datas)} runs"
    return _page("page.html.j2", title, document(datas, verdicts, when, shares), when, runs=runs,
                 overview=render_blocks(overview_blocks(datas, shares)),
                 verdicts=render_blocks(verdict_blocks(
                     verdicts, [d.run.id for d in datas if len(several.get(d.run.id, ())) > 1],
                     workloads={r.workload for d in datas for r in d.results},
                     n_runs=len(datas))),
                 n_results=sum(len(d.results) for d in datas))


def render_sections_page(title: str, parts_: list[tuple[str, list[Section]]], data: HistoryDoc | MatrixDoc, *,
                         intro: str | None = None, generated_at: datetime | None = None) -> str:
    """A self-contained page of titled section lists (`dlperf history`, `dlperf matrix`), `data` embedded as
    JSON: the same renderer, style and script as the run report, and no web address either."""
    drawn = [{"anchor": f"part-{i}", "title": t, "html": render_blocks(blocks(sections, prefix=f"p{i}"))}
             for i, (t, sections) in enumerate(parts_, 1)]
    return _page("sections_page.html.j2", title, data, generated_at or datetime.now(UTC), parts=drawn, intro=intro)
