"""`dlperf runs`, `show`, `compare`, `export`, `report`: what the store holds, as tables, files and reports.

`cli.readers` reads what they show from the store; which sections a run's report has is report.registry's
choice."""

from __future__ import annotations

from pathlib import Path

import click

from dlperf.cli.options import db_option, new_console, open_store, write_output
from dlperf.units import format_number, format_time


@click.command()
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@db_option
def runs(limit: int, db: str | None) -> None:
    """The most recent runs in the store."""
    from rich.table import Table

    rows = open_store(db).list_runs(limit)
    table = Table(title="runs", title_justify="left")
    for col in ("run", "study", "variant", "status", "cases", "ok", "started (UTC)"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["study"], r["variant"], r["status"], f"{r['n_done'] or 0}/{r['n_cases']}",
                      str(r["n_ok"] or 0), f"{r['started_at']:%Y-%m-%d %H:%M:%S}")
    new_console().print(table)


@click.command()
@click.argument("run_ref", metavar="RUN")
@db_option
def show(run_ref: str, db: str | None) -> None:
    """The results table of RUN (an id, a unique prefix, or `latest`)."""
    from dlperf.report.tables import render_terminal

    store = open_store(db)
    run_row = store.run(run_ref)
    render_terminal(run_row, store.run_environment(run_row["id"]), store.results(run_row["id"]), new_console())


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@db_option
def compare(run_a: str, run_b: str, db: str | None) -> None:
    """Per-case ratio RUN_B / RUN_A of median times, with a Mann-Whitney U test on the raw samples."""
    from rich.markup import escape
    from rich.table import Table

    from dlperf.hardware.identity import diff, identity
    from dlperf.report.compare import ALPHA, compare_runs

    store = open_store(db)
    ra, rb = store.run(run_a), store.run(run_b)
    console = new_console()
    env_a, env_b = store.run_environment(ra["id"]), store.run_environment(rb["id"])
    diffs = diff(identity(env_a), identity(env_b))  # the machine and software; not peaks, version or commit
    derived = [key for key, _, _ in diff(env_a, env_b) if key not in {k for k, _, _ in diffs}]
    if derived and not diffs:
        console.print(escape(f"same environment; derived figures differ ({', '.join(derived[:4])})"),
                      highlight=False)
    if diffs:
        console.print(f"[bold yellow]the two runs come from different environments[/] ({len(diffs)} fields differ); "
                      "ratios below compare different machines or software:", highlight=False)
        for key, va, vb in diffs[:12]:
            console.print(escape(f"  {key}: {va!r} -> {vb!r}"), highlight=False)
    rows = compare_runs(store.results(ra["id"]), store.results(rb["id"]))
    table = Table(title=f"compare A={ra['id']}  B={rb['id']}", title_justify="left")
    for col in ("case", "A median", "B median", "B/A", "p (MWU)", "verdict"):
        table.add_column(col, overflow="fold")
    for c in rows:
        case = c.case_key + (f" #{c.repetition}" if c.repetition else "")
        style = {"faster": "green", "slower": "red"}.get(c.verdict)
        table.add_row(escape(case), format_time(c.median_a_s), format_time(c.median_b_s),
                      format_number(c.ratio, ".3f"), format_number(c.p_value, ".3g"), c.verdict, style=style)
    console.print(table)
    console.print(f"B/A < 1: B is faster. 'within noise': Mann-Whitney U two-sided p >= {ALPHA}.", highlight=False)


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="write to this file instead of stdout")
@db_option
def export(run_ref: str, fmt: str, output: Path | None, db: str | None) -> None:
    """RUN's results as CSV (one flat row per case) or JSON (everything, raw samples included)."""
    from dlperf.store.export import to_csv, to_json

    store = open_store(db)
    run_row = store.run(run_ref)
    results = store.results(run_row["id"])
    text = to_csv(results) if fmt == "csv" else to_json(run_row, store.run_environment(run_row["id"]), results)
    write_output(text, output)


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["terminal", "markdown"]), default="terminal", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None)
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where plots go [default: reports/RUN/]")
@db_option
def report(run_ref: str, fmt: str, output: Path | None, plot_dir: Path | None, db: str | None) -> None:
    """A report of RUN: tables (terminal or Markdown) and, for an ops run, the study layout and a roofline plot."""
    from dlperf.cli.readers import report_data
    from dlperf.report.registry import study_sections
    from dlperf.report.sections import render_markdown as sections_markdown
    from dlperf.report.sections import render_terminal as sections_terminal
    from dlperf.report.tables import render_markdown, render_terminal

    data = report_data(open_store(db), run_ref, plot_dir)
    sections = study_sections(data)
    if fmt == "markdown":
        md_dir = output.parent if output else Path.cwd()
        write_output(render_markdown(data.run, data.env, data.results) + sections_markdown(sections, md_dir), output)
    else:
        console = new_console()
        render_terminal(data.run, data.env, data.results, console)
        sections_terminal(sections, console)
