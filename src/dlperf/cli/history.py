"""`dlperf history` and `dlperf matrix`: one study over time on each machine, and across machines.

The store reads are here (every run of the study, its environment with the run's derived figures, its
typed results, the environments of the machines that ran them); `analysis.history` / `report.matrix` build
the data, their section builders draw it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dlperf.cli.compare import REGRESSION_EXIT, gate_options
from dlperf.cli.options import db_option, new_console, open_store, write_output
from dlperf.untrusted import path_component

if TYPE_CHECKING:
    from dlperf.core.environment import Environment
    from dlperf.core.result import CaseResult
    from dlperf.report.history_report import HistoryDoc
    from dlperf.report.matrix import MatrixDoc
    from dlperf.store import Store
    from dlperf.store.rows import RunRow

FORMATS = ["terminal", "markdown", "json", "html"]


def study_runs(store: Store, study: str) -> tuple[list[RunRow], dict[str, Environment], dict[str, list[CaseResult]]]:
    """Every run of `study` (any status), each run's environment (`Store.run_environment`) and typed results,
    by run id. No run of it: DlperfError naming the studies the store holds."""
    from dlperf.errors import DlperfError

    runs = store.runs_of_study(study)
    if not runs:
        studies = sorted({r.study for r in store.list_runs(10_000)})
        raise DlperfError(f"no runs of study {study!r} in {store.url} (its studies: "
                          f"{', '.join(studies) if studies else 'none yet'})")
    envs = {r.id: store.run_environment(r.id) for r in runs}
    results = {r.id: store.results(r.id) for r in runs}
    return runs, envs, results


def _emit(sections: list[Any], doc: HistoryDoc | MatrixDoc, fmt: str, output: Path | None, title: str = "",
          default: str = "") -> None:
    from dlperf.report.sections import render_markdown, render_terminal

    if fmt == "html":
        from dlperf.cli.results import write_html
        from dlperf.report.html import render_sections_page

        write_html(render_sections_page(title, [(title.removeprefix("dlperf "), sections)], doc),
                   output or Path("reports") / default)
    elif fmt == "json":
        write_output(json.dumps(doc, indent=2, default=str) + "\n", output)
    elif fmt == "markdown":
        write_output(render_markdown(sections, output.parent if output else Path.cwd()), output)
    elif output is not None:  # the terminal's tables, 200 columns wide, written as other formats are
        import io

        from rich.console import Console

        text = io.StringIO()
        render_terminal(sections, Console(file=text, width=200, soft_wrap=False))
        write_output(text.getvalue(), output)
    else:
        render_terminal(sections, new_console())


@click.command(epilog=f"Exit status: 0; {REGRESSION_EXIT} with --fail-on-regression when the newest run of a case "
               "regressed on any machine shown, or could not be checked (contended, invalid or failed where "
               "earlier runs were not); 2 on bad input.")
@click.argument("study")
@click.option("--case", "case_filter", default=None, metavar="SUBSTRING", help="only cases whose key contains this")
@click.option("--machine", default=None, metavar="ID",
              help="only this machine (its label, its id or a unique prefix, as history prints it) [default: every "
                   "machine of the study, one timeline each]")
@click.option("--metric", type=click.Choice(["time"]), default="time", show_default=True,
              help="what is followed: the median time per step (per call) with its 95% interval")
@gate_options("smallest step that counts as a change point; also the threshold of the newest run's verdict "
              "without --fail-on-regression",
              f"exit {REGRESSION_EXIT} when a case's newest run is slower than its baseline (the segment before "
              "the last change point) by more than PCT with intervals that do not overlap, beyond the machine's "
              "drift and (over 3 or more baseline runs) their spread from run to run, or could not be checked; "
              "the cases are listed on stderr")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None)
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="draw a history figure per case group (PNG and SVG) into this folder [default: no figures; html: "
                   "drawn and inlined]")
@db_option
def history(study: str, case_filter: str | None, machine: str | None, metric: str, min_effect: float,
            fail_pct: float | None, fmt: str, output: Path | None, plot_dir: Path | None, db: str | None) -> None:
    """The runs of STUDY over time, one timeline per machine (never merged; a framework, dlperf or kernel
    change on the same machine stays on its timeline and is marked), each case's median per run, its
    change points (PELT) and the newest run against the level before the last change. A fleet run is split
    by the machine that ran each case: each machine's share is a run on that machine's timeline."""
    from dlperf.analysis.history import build_history
    from dlperf.cli.readers import result_environments
    from dlperf.report.history_report import history_json, history_sections

    store = open_store(db, create=False)
    runs, envs, results = study_runs(store, study)
    result_envs = result_environments(store, runs, (r for rs in results.values() for r in rs))
    hist = build_history(study, runs, envs, results, min_effect=min_effect / 100, fail_pct=fail_pct,
                         case_filter=case_filter, machine=machine, metric=metric, result_envs=result_envs)
    with tempfile.TemporaryDirectory(prefix="dlperf-history-") as scratch:
        if fmt == "html" and plot_dir is None:  # figures are inlined into the page
            plot_dir = Path(scratch)
        sections = history_sections(hist, plot_dir=plot_dir) if fmt != "json" or plot_dir is not None else []
        _emit(sections, history_json(hist), fmt, output, f"dlperf history: study {study}",
              f"history-{path_component(study, 100)}.html")
    failed = hist.failures()
    if failed:
        click.echo(f"dlperf: {len(failed)} case(s) failed the gate at +{fail_pct:g}%: "
                   + ", ".join(f"{c.case_key} on machine {t.machine_id} ({c.newest.verdict})" for t, c in failed),
                   err=True)
        raise click.exceptions.Exit(REGRESSION_EXIT)


@click.command()
@click.argument("study")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="terminal", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None)
@db_option
def matrix(study: str, fmt: str, output: Path | None, db: str | None) -> None:
    """STUDY across the machines of the store: the newest complete run on each machine, one column per machine
    (never merged), a row per case (median time per step, validity; missing cases with their status). A fleet
    run counts for every machine its results came from; each of its columns holds that machine's cases."""
    from dlperf.cli.readers import result_environments
    from dlperf.report.matrix import build_matrix, matrix_json, matrix_sections

    store = open_store(db, create=False)
    runs, envs, results = study_runs(store, study)
    result_envs = result_environments(store, runs, (r for rs in results.values() for r in rs))
    mat = build_matrix(study, runs, envs, results, result_envs)
    _emit(matrix_sections(mat), matrix_json(mat), fmt, output, f"dlperf matrix: study {study}",
          f"matrix-{path_component(study, 100)}.html")


__all__ = ["history", "matrix", "study_runs"]
