"""The `dlperf` command. Thin: parse, call, print. Heavy imports happen inside commands.

One module per command group; every command is registered here, in `_register`:
    run.py      run, peaks                     results.py  runs, show, export, report
    compare.py  compare (two runs case by case; the CI gate)
    maxbatch.py maxbatch (the largest batch that fits)
    execute.py  the run-a-study glue that run, peaks, serve, bench and maxbatch share; run_options.py RunOptions
    serve.py    serve (the serving study: LoadGen's scenarios; serve_select.py picks its cases)
    plan.py     plan (a study's cases, their count, an estimate of their time; runs nothing)
    history.py  history, matrix (a study over time per machine, and across machines)
    hw.py       hw list/show/compare/diff-study/measured
    recommend.py recommend                     doctor.py   doctor, list
    verdicts.py verdicts (the seed studies' claims judged on runs)
    bundle.py   bundle export/import (a run as one file, for a store its machine cannot reach)
    fleet.py    fleet worker/scheduler (Dask: a study's cases on several machines; run --executor dask)
    options.py  what they share: --db, the console, the store, memory sizes, -o
"""

from __future__ import annotations

import os
import sys

import click

from dlperf import __version__
from dlperf.errors import DlperfError
from dlperf.untrusted import printable


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dlperf")
def cli() -> None:
    """dlperf: how fast, how efficiently and at what cost deep-learning work runs, and why.

    Start with `dlperf doctor`, then `dlperf run smoke --quick`.
    """


def _register() -> None:
    """Every command and command group of `dlperf`, in one place."""
    from dlperf.cli import (
        bench,
        bundle,
        compare,
        doctor,
        fleet,
        history,
        hw,
        maxbatch,
        plan,
        recommend,
        results,
        run,
        serve,
        verdicts,
    )

    for command in (doctor.doctor, doctor.list_cmd,
                    plan.plan, run.run, run.peaks, maxbatch.maxbatch, serve.serve, bench.bench,
                    results.runs, results.show, compare.compare, results.export, results.report,
                    hw.hw, recommend.recommend, verdicts.verdicts,
                    history.history, history.matrix, bundle.bundle, fleet.fleet):
        cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user-facing failure is one line on stderr and a non-zero exit."""
    try:
        code = cli.main(args=argv, prog_name="dlperf", standalone_mode=False)
    except DlperfError as exc:  # its text may quote a path or an id from outside: spelled, on one line
        click.echo(f"dlperf: {printable(exc)}" if exc.exit_code == 130 else f"dlperf: error: {printable(exc)}",
                   err=True)
        sys.exit(_signal_exit() if exc.exit_code == 130 else exc.exit_code)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx and exc.ctx.parent else " (see 'dlperf --help')"
        click.echo(f"dlperf: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"dlperf: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("dlperf: interrupted", err=True)
        sys.exit(_signal_exit())
    except Exception as exc:
        if os.environ.get("DLPERF_DEBUG"):
            raise
        from dlperf.store.failures import user_facing

        facing = user_facing(exc)
        if facing is not None:  # a database or disk that failed under the command: one line, its own code
            click.echo(f"dlperf: error: {facing}", err=True)
            sys.exit(facing.exit_code)
        if _is_damaged_store(exc):
            orig = getattr(exc, "orig", exc)
            click.echo(f"dlperf: error: the results store cannot be read ({orig}); check it with "
                       f"`sqlite3 FILE 'PRAGMA integrity_check'` and restore a copy; nothing was written to it",
                       err=True)
            sys.exit(2)
        click.echo(f"dlperf: internal error: {type(exc).__name__}: {exc} (set DLPERF_DEBUG=1 for the traceback)",
                   err=True)
        sys.exit(70)
    sys.exit(code or 0)


def _is_damaged_store(exc: Exception) -> bool:
    """A database the store reads but cannot make sense of (a truncated or corrupt SQLite file)."""
    from sqlalchemy.exc import DatabaseError

    text = str(getattr(exc, "orig", "")).lower()
    return type(exc) is DatabaseError and ("malformed" in text or "not a database" in text)


def _signal_exit() -> int:
    """128 + the signal that stopped the command (143 for SIGTERM, 129 for SIGHUP); 130 for Ctrl-C."""
    from dlperf.cli.execute import STOPPED_BY

    return 128 + STOPPED_BY[-1] if STOPPED_BY else 130


_register()

__all__ = ["cli", "main"]
