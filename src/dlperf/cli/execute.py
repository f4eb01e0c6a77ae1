"""The run-a-study glue that `dlperf run`, `serve`, `bench`, `maxbatch` and `peaks` share.

`execute_study` runs a loaded study as `dlperf run` does: the checks that need the study but no store (its
threads, its case count, the memory cap, `--resume RUN`), then `open_session` (the store, the console, clean
stops on SIGTERM/SIGHUP: what `maxbatch` and `peaks` open too), then the sweep with its progress lines, on a
fleet where `--scheduler` says so. `print_run` is the ending `run` and `bench` share (the run table, the per-machine
sections, where the results went, the next commands); `results_line` is the line every one of them ends with.

Light at import time: the runner, the store and the reports are imported when a command runs.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any, NamedTuple

import click
from rich.markup import escape

from dlperf.cli.fleet import check_scheduler, connect_fleet
from dlperf.cli.options import new_console, open_store
from dlperf.cli.plan import RUN_CASE_LIMIT
from dlperf.cli.run_options import RunOptions
from dlperf.errors import DlperfError, NoStoreError, StudyError, UnknownRunError
from dlperf.runner.footprint import check_run_cap

if TYPE_CHECKING:
    from rich.console import Console

    from dlperf.runner.sweep import SweepSummary
    from dlperf.store import Store
    from dlperf.store.rows import RunRow
    from dlperf.studies.loader import Study


class Executed(NamedTuple):
    """What `execute_study` leaves: the store the run went into, the console it printed on, the sweep's summary."""

    store: Store
    console: Console
    summary: SweepSummary


def open_session(db: str | None) -> tuple[Store, Console]:
    """The store at `db` (created if need be, refused if read-only), a console on stdout, and SIGTERM/SIGHUP made to
    stop the command as Ctrl-C does: what every measuring command opens before its first worker."""
    store = open_store(db)
    console = new_console()
    stop_cleanly_on_signals()
    return store, console


def execute_study(study_arg: str, loaded: Study, options: RunOptions) -> Executed:
    """Run the study `loaded` (named `study_arg` on the command line) as `dlperf run` does: its checks before any
    store is opened (the threads it asks for, the case limit, the memory cap, the run to resume), then the store,
    the console, clean stops on SIGTERM/SIGHUP and the sweep with its progress lines."""
    from dlperf.cli.progress import ConsoleEvents
    from dlperf.runner.sweep import run_study

    frameworks, devices = list(options.frameworks), list(options.devices)
    logical = os.cpu_count() or 1
    if options.threads is None and options.scheduler is None and loaded.settings.threads is not None and \
            loaded.settings.threads > logical:
        raise DlperfError(f"{study_arg}: threads: {loaded.settings.threads} in the study file, but this machine has "
                          f"{logical} logical cores; give --threads N (at most {logical}) to run it here")
    check_case_limit(study_arg, loaded, frameworks, devices, options.max_cases)
    check_run_cap(loaded, frameworks, devices, options.mem_limit_mb, options.threads, warn=warn_line)
    if options.resume:
        check_resume(loaded, options.resume, options.db)
    if options.scheduler:  # the cases run on a fleet's workers
        check_scheduler(options.scheduler)
    store, console = open_session(options.db)
    executor = connect_fleet(options.scheduler, store.url, warn_line) if options.scheduler else None
    try:
        summary = run_study(loaded, store, frameworks=frameworks, devices=devices, new=options.new,
                            resume=options.resume, retry_failed=options.retry_failed, overrides=options.overrides(),
                            counters=options.counters, events=ConsoleEvents(console), wait_idle_s=options.wait_idle_s,
                            executor=executor)
    finally:
        if executor is not None:
            executor.close()
    return Executed(store, console, summary)


def print_run(done: Executed, next_commands: list[str]) -> None:
    """A finished run as `dlperf run` and `dlperf bench` end: its table (a fleet's with a machine column), its
    study's sections (per machine), where it is stored, and the commands that show more of it (`next_commands`:
    `dlperf`'s words after it, RUN standing for the run's id)."""
    from dlperf.cli.readers import machine_reports, report_data, run_machines
    from dlperf.report.registry import machine_sections
    from dlperf.report.sections import render_terminal as render_sections
    from dlperf.report.tables import render_terminal

    store, console, summary = done
    data = report_data(store, summary.run_id, None)
    machines = run_machines(store, data)
    render_terminal(data.run, data.env, data.results, console, machines)
    render_sections(machine_sections(data, machine_reports(store, data, machines)), console)
    results_line(console, summary.run_id, store.url)
    console.print("next: " + " | ".join(f"dlperf {c.replace('RUN', summary.run_id)}" for c in next_commands),
                  highlight=False)


def results_line(console: Console, run_id: str, store_url: str) -> None:
    """Where a run went: its id (bold) and the store's URL, as the last line of every measuring command."""
    console.print(f"results: run [bold]{run_id}[/] in {escape(store_url)}", highlight=False)


class ResumeMismatch(StudyError):
    """--resume names a run of another study, variant or selection (the same study file with other points)."""

    def __init__(self, message: str, run_id: str, existing: RunRow) -> None:
        super().__init__(message)
        self.run_id, self.existing = run_id, existing


def check_resume(loaded: Study, resume: str, db: str | None) -> None:
    """--resume RUN names a run in the store, of this study as loaded (name, variant and points): one line if not,
    before the store is created or any line (the threads chosen) is printed. A store file that does not exist
    has no run to resume, and is left uncreated."""
    try:
        store = open_store(db, create=False)
    except NoStoreError as exc:
        raise UnknownRunError(f"--resume {resume}: no such run: the store {exc.path} does not exist (nothing has "
                              "been run into it; check --db or DLPERF_DB)") from None
    try:
        run_id = store.resolve_run(resume)
    except DlperfError as exc:
        raise type(exc)(f"--resume {resume}: {exc}") from None
    existing = store.run(run_id)
    if (existing.study, existing.variant, existing.study_hash) != (
            loaded.name, loaded.variant, loaded.study_hash):
        raise ResumeMismatch(f"--resume {resume}: run {run_id} is of study {existing.study} "
                             f"({existing.variant}), or of another version of its file; it cannot be resumed with "
                             f"{loaded.name} ({loaded.variant})", run_id, existing)


def warn_line(text: str) -> None:
    """One warning line on stderr; the command goes on."""
    click.echo(f"dlperf: warning: {text}", err=True)


def check_case_limit(study_arg: str, study: Study, frameworks: list[str], devices: list[str],
                     max_cases: int | None) -> None:
    """Refuse, before anything starts, a study of more case-repetitions than the limit (`RUN_CASE_LIMIT`, or
    `--max-cases N`): counted point by point without building the cases, and only until past the limit."""
    from dlperf.runner.cases import count_run_cases
    from dlperf.studies.loader import COUNT_CAP

    limit = max_cases or RUN_CASE_LIMIT
    count = count_run_cases(study, frameworks, devices, stop_after=max(limit, COUNT_CAP))
    if count.exact and count.n <= limit:
        return
    how_many = f"{count.n:,}" if count.exact else f"more than {count.n:,} (at most {count.at_most:,})"
    plan = " ".join(["dlperf plan", study_arg, *(["--quick"] if study.variant == "quick" else []),
                     *(f"--framework {f}" for f in frameworks), *(f"--device {d}" for d in devices)])
    raise StudyError(f"{study.name} ({study.variant}) expands to {how_many} case-repetitions, over "
                     f"{'--max-cases' if max_cases else 'the limit'} {limit:,}: see them with `{plan}`, or run "
                     f"them with --max-cases N (N at least their count)")


#: The signal that stopped this process (SIGTERM, SIGHUP), for its exit status 128 + N; none for Ctrl-C.
STOPPED_BY: list[int] = []


def raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    """A SIGTERM/SIGHUP handler: stop as cleanly as Ctrl-C does (the sweep stores what finished, marks the run
    interrupted and says so), then exit 128 + the signal's number, as shells expect (143, 129)."""
    STOPPED_BY.append(signum)
    raise KeyboardInterrupt


def stop_cleanly_on_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal) stop a command as Ctrl-C does."""
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, raise_keyboard_interrupt)
