"""`dlperf runs`, `show`, `export`, `report`: what the store holds, as tables, files and reports (`compare`: its
own module).

`cli.readers` reads what they show from the store; which sections a run's report has is report.registry's
choice."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dlperf.cli.options import db_option, new_console, open_store, write_file, write_output
from dlperf.untrusted import path_component, printable

if TYPE_CHECKING:
    pass


@click.command()
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@db_option
def runs(limit: int, db: str | None) -> None:
    """The most recent runs in the store. A run left `running` by a process that is gone (killed, its host
    rebooted, no heartbeat for DLPERF_LEASE_STALE_S) shows as `interrupted (owner gone)` (a maxbatch search
    says it is not resumed). A search's cases are its probes stored (its count is not known beforehand)."""
    from rich.markup import escape
    from rich.table import Table

    from dlperf.runner.lifecycle import lease_stale_s, shown_cases, shown_status

    rows = open_store(db, create=False).list_runs(limit)
    stale_s = lease_stale_s()
    table = Table(title="runs", title_justify="left")
    for col in ("run", "study", "variant", "status", "cases", "ok", "started (UTC)"):
        table.add_column(col)
    for r in rows:
        status = shown_status(r.status, r.lease, stale_s, study=r.study)
        cells = (r.id, r.study, r.variant, status, shown_cases(r.study, r.n_done or 0, r.n_cases),
                 str(r.n_ok or 0), f"{r.started_at:%Y-%m-%d %H:%M:%S}")
        table.add_row(*(escape(printable(c)) for c in cells))  # ids may come from a bundle: shown as data
    new_console().print(table)


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--errors", is_flag=True,
              help="instead of the table: every failed case (error, timeout, oom, crashed) whole, with its full "
                   "reason and the traceback its worker stored")
@click.option("--case", "cases", multiple=True, metavar="KEY",
              help="instead of the table: this case whole (its key as `export` gives it, or a part of it that "
                   "names it; repeatable)")
@db_option
def show(run_ref: str, errors: bool, cases: tuple[str, ...], db: str | None) -> None:
    """The results table of RUN (an id, a unique prefix, or `latest`); with --errors or --case, cases whole.
    A run whose results came from several machines (a fleet run) has a `machine` column."""
    from dlperf.cli.readers import run_shares
    from dlperf.report.tables import render_terminal
    from dlperf.runner.lifecycle import shown_status

    store = open_store(db, create=False)
    run_row, results, shares = run_shares(store, run_ref)
    if errors or cases:
        _show_cases(run_row.id, results, errors, cases)
        return
    run_row = replace(run_row, status=shown_status(run_row.status, store.lease(run_row.id), study=run_row.study))
    render_terminal(run_row, store.run_environment(run_row.id), results, new_console(), machines=shares)


def _show_cases(run_id: str, results: list[Any], errors: bool, cases: tuple[str, ...]) -> None:
    """`show --errors` / `--case KEY`: the chosen cases whole, as plain lines (no table folds them)."""
    from dlperf.errors import DlperfError
    from dlperf.report.tables import FAILED, case_details

    chosen = [r for r in results if r.status in FAILED] if errors else []
    for text in cases:
        exact = [r for r in results if r.case_key == text]
        found = exact or [r for r in results if text and text in r.case_key]
        if not found:
            keys = sorted({r.case_key for r in results})
            raise DlperfError(f"--case {text!r}: no case of run {run_id} has that key ({len(keys)} cases, e.g. "
                              f"{keys[0] if keys else 'none'}; `dlperf export {run_id}` lists every key)")
        chosen += [r for r in found if r not in chosen]
    if not chosen:
        click.echo(f"no failed case in run {run_id}")
        return
    click.echo("\n".join(case_details(chosen)).rstrip())


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="write to this file instead of stdout")
@db_option
def export(run_ref: str, fmt: str, output: Path | None, db: str | None) -> None:
    """RUN's results as CSV (one flat row per case) or JSON (everything, raw samples included)."""
    from dlperf.store.export import to_csv, to_json

    store = open_store(db, create=False)
    run_row = store.run(run_ref)
    results = store.results(run_row.id)
    text = to_csv(results) if fmt == "csv" else to_json(run_row, store.run_environment(run_row.id), results)
    write_output(text, output)


@click.command()
@click.argument("run_refs", metavar="RUN [RUN...]", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["terminal", "markdown", "html"]), default="terminal",
              show_default=True,
              help="html: one self-contained page (several RUNs: one part each), opens offline from disk")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="write to this file [html default: reports/RUN.html, with several RUNs reports/RUN+N.html]")
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where plots go [default: reports/RUN/; html: inlined in the page, kept only with --plot-dir]")
@db_option
def report(run_refs: tuple[str, ...], fmt: str, output: Path | None, plot_dir: Path | None, db: str | None) -> None:
    """A report of RUN: tables (terminal or Markdown) and, for an ops run, the study layout and a roofline plot;
    with --format html, one page for one or more RUNs (verdicts, tables, plots, samples, environment, raw data)."""
    from dlperf.cli.readers import machine_reports, report_data, run_machines
    from dlperf.report.registry import machine_sections
    from dlperf.report.sections import render_markdown as sections_markdown
    from dlperf.report.sections import render_terminal as sections_terminal
    from dlperf.report.tables import render_markdown, render_terminal

    if fmt == "html":
        html_report(run_refs, output, plot_dir, db)
        return
    if len(run_refs) > 1:
        raise click.UsageError(f"--format {fmt} reports one RUN; several RUNs make one page with --format html")
    store = open_store(db, create=False)
    data = report_data(store, run_refs[0], plot_dir)
    machines = run_machines(store, data)
    sections = machine_sections(data, machine_reports(store, data, machines))  # a fleet run: one per machine
    if fmt == "markdown":
        md_dir = output.parent if output else Path.cwd()
        write_output(render_markdown(data.run, data.env, data.results, machines)
                     + sections_markdown(sections, md_dir), output)
    else:
        console = new_console()
        render_terminal(data.run, data.env, data.results, console, machines)
        sections_terminal(sections, console)


def html_report(run_refs: tuple[str, ...], output: Path | None, plot_dir: Path | None, db: str | None) -> None:
    """`report --format html`: read each run, evaluate the claims on them, write one page, say where and its size.
    Plots are drawn in a scratch folder and inlined, unless --plot-dir keeps them (one subfolder per run when
    there are several). A run on several machines (a fleet run) has one study report per machine, and the
    claims are judged on the runs of one machine only (`dlperf verdicts RUN@MACHINE` judges one machine's
    share; the page says which runs were left out)."""
    import tempfile

    from dlperf.claims import evaluate
    from dlperf.cli.readers import machine_reports, report_data, run_histories, run_machines
    from dlperf.report.html import render_page

    store = open_store(db, create=False)
    run_ids = list(dict.fromkeys(store.resolve_run(ref) for ref in run_refs))
    with tempfile.TemporaryDirectory(prefix="dlperf-html-") as scratch:
        base = plot_dir or Path(scratch)
        datas = [report_data(store, run_id,
                             base / path_component(run_id) if plot_dir is None or len(run_ids) > 1 else base)
                 for run_id in run_ids]
        machines = {d.run.id: run_machines(store, d) for d in datas}  # a fleet run: its results by machine
        per_machine = {d.run.id: machine_reports(store, d, machines[d.run.id]) for d in datas}
        judged = [d for d in datas if not per_machine[d.run.id]]  # never a claim on two machines pooled
        page = render_page(datas, evaluate(judged), histories=run_histories(store, datas, machines),
                           machines=machines, per_machine=per_machine)
    more = f"+{len(run_ids) - 1}" if len(run_ids) > 1 else ""
    write_html(page, output or Path("reports") / f"{path_component(run_ids[0])}{more}.html")


def write_html(page: str, output: Path) -> None:
    """Write a page (its folder made), then one line: where, and its size."""
    from dlperf.errors import DlperfError
    from dlperf.store.failures import os_error

    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, str(output)) or DlperfError(f"{output}: cannot write ({exc.strerror or exc})") from None
    write_file(output, page)
    click.echo(f"wrote {output} ({len(page.encode()) / 1024:,.0f} KB)")
