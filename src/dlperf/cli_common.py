"""What every `dlperf` command module shares: the console, the store and the --db option.

Its own module so that command modules (cli_hw, cli_recommend) can import it at import time without
importing `dlperf.cli`, which runs as `__main__` under `python -m dlperf.cli`.
"""

from __future__ import annotations

import os
from typing import Any

import click

DB_HELP = (
    "results database: a SQLite path or an SQLAlchemy URL "
    "[env DLPERF_DB; default ~/.local/share/dlperf/results.sqlite]"
)


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    console = Console(stderr=stderr, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped or logged output: do not fold tables to 80 columns.
        console = Console(stderr=stderr, soft_wrap=False, width=200)
    return console


def _store(db: str | None) -> Any:
    from dlperf.store import Store

    return Store(db)


db_option = click.option("--db", envvar="DLPERF_DB", default=None, metavar="PATH|URL", help=DB_HELP)
