"""What every `dlperf` command module shares: the console, the store, the --db option, the memory-size
parameter type, KEY=VALUE options, options grouped into dataclasses (`grouped`) and writing a command's text to
stdout or a file (-o).

Light at import time (click only): every command module imports it when `dlperf --help` runs.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from dlperf.errors import DlperfError

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = (
    "results database: a SQLite path or an SQLAlchemy URL "
    "[env DLPERF_DB; default ~/.local/share/dlperf/results.sqlite]"
)


def new_console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr) that does not fold tables to 80 columns when output is piped."""
    from rich.console import Console

    console = Console(stderr=stderr, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped or logged output: do not fold tables to 80 columns.
        console = Console(stderr=stderr, soft_wrap=False, width=200)
    return console


def open_store(db: str | None, *, create: bool = True) -> Any:
    """The results store at `db` (a path or URL; None: DLPERF_DB's or the default).

    `create=False` for commands that only read: a SQLite file that does not exist is an error (a typo'd
    --db would otherwise become a new, empty store that shows nothing), never created."""
    from dlperf.store import Store
    from dlperf.store.db import default_db_path
    from dlperf.store.urls import sqlite_path

    if not create:
        text = str(db if db is not None else os.environ.get("DLPERF_DB") or default_db_path())
        path = sqlite_path(text) if "://" in text else Path(text).expanduser()  # sqlite:///file:P?uri=true too
        if path is not None and str(path) != ":memory:" and not path.is_file():
            from dlperf.errors import NoStoreError

            raise NoStoreError(path)
        if path is not None and str(path) != ":memory:" and path.stat().st_size == 0:
            from dlperf.errors import StoreError

            raise StoreError(f"{path} is an empty file, not a results store: nothing has been run into it (check "
                             f"--db or DLPERF_DB; `dlperf run` makes a store of it); it was left as it is")
    store = Store(db)
    if create:
        store.check_writable()  # a read-only store: one line before any work, not after it
    return store


db_option = click.option("--db", envvar="DLPERF_DB", default=None, metavar="PATH|URL", help=DB_HELP)


def study_selection(quick_help: str) -> Callable[[F], F]:
    """STUDY and the options that pick its cases (--quick, --framework, --device), as `run` and `plan`
    share them: `plan` shows what `run` with the same words would run."""
    def apply(f: F) -> F:
        for option in reversed([
            click.argument("study"),
            click.option("--quick", is_flag=True, help=quick_help),
            click.option("--framework", "frameworks", multiple=True, metavar="NAME",
                         help="only this framework (repeatable)"),
            click.option("--device", "devices", multiple=True, metavar="DEV",
                         help="only this device: cpu, cuda, cuda:N (repeatable)"),
        ]):
            f = option(f)
        return f

    return apply


def grouped(**groups: type[Any]) -> Callable[[F], F]:
    """A command's click parameters gathered into dataclasses before it is called: `grouped(options=RunOptions)`
    calls the command with `options=RunOptions(...)` made of the parameters named as its fields, instead of each
    one as an argument. Groups take their fields in the order given (a name goes to the first group that has it);
    making a group runs its checks, so a usage error is raised before the command's body starts."""
    def apply(f: F) -> F:
        @functools.wraps(f)
        def call(**params: Any) -> Any:
            for arg, cls in groups.items():
                names = {field.name for field in dataclasses.fields(cls)}
                params[arg] = cls(**{k: params.pop(k) for k in list(params) if k in names})
            return f(**params)

        return cast(F, call)  # click calls it with keywords only, as it would call `f`

    return apply


def refuse_steps_with_budget(steps: int | None, budget_s: float | None) -> None:
    """--steps replaces the adaptive stop that --budget bounds: both at once is a usage error."""
    if steps is not None and budget_s is not None:
        raise click.UsageError("--steps times a fixed number of calls and --budget bounds the adaptive stop, "
                               "which --steps replaces: give one of them")


class MemorySize(click.ParamType):
    """A memory size: `2GiB`, `512MiB`, `1.5GB`, or a plain number of MiB; converted to MiB (units.parse_size_mib)."""

    name = "size"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        from dlperf.units import parse_size_mib

        if isinstance(value, int):
            return value
        try:
            return parse_size_mib(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class KeyValue(click.ParamType):
    """`KEY=VALUE`, the value read as a YAML scalar (`64` an int, `true` a bool, `gpt2-tiny` a string), as a study
    file's params would read it; converted to (key, value)."""

    name = "KEY=VALUE"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[str, YamlScalar]:
        import yaml

        if isinstance(value, tuple):
            return value
        key, sep, raw = str(value).partition("=")
        if not sep or not key.strip():
            self.fail(f"{value!r} is not KEY=VALUE", param, ctx)
        try:
            parsed = yaml.safe_load(raw)
        except yaml.YAMLError:
            self.fail(f"{value!r}: the value is not a YAML scalar", param, ctx)
        if isinstance(parsed, (dict, list)):
            self.fail(f"{value!r}: the value must be a single value, not a YAML list or mapping", param, ctx)
        return key.strip(), parsed


#: A value `KeyValue` gives: one YAML scalar as `yaml.safe_load` reads it (null, a bool, a number, a string, a
#: timestamp as a date or datetime, `!!binary` as bytes); a list or mapping is refused.
YamlScalar = str | int | float | bool | bytes | date | None


def key_values(pairs: tuple[tuple[str, YamlScalar], ...], option: str = "-p") -> dict[str, YamlScalar]:
    """Repeated KEY=VALUE options as a dict; a key given twice is a usage error."""
    out: dict[str, YamlScalar] = {}
    for key, value in pairs:
        if key in out:
            raise click.UsageError(f"{option} {key} is given twice")
        out[key] = value
    return out


def write_output(text: str, output: Path | None) -> None:
    """`text` to stdout, or to the file `output` (then one line on stderr says where it went)."""
    if output is None:
        sys.stdout.write(text)
        return
    write_file(output, text)
    click.echo(f"wrote {output}", err=True)


def write_file(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all: written to a temporary file beside it, renamed into place, the
    temporary file removed however the write ends (a full disk leaves no empty or cut file). A path that
    exists and is not a regular file (a terminal, a pipe, /dev/stdout) is written into as it is. An OSError
    is one line: a full disk or a refused permission with their own exit codes (store.failures)."""
    import tempfile

    from dlperf.store.failures import os_error

    data = text.encode("utf-8")
    tmp: str | None = None
    try:
        if path.exists() and not path.is_file():
            with path.open("wb") as f:
                f.write(data)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain write would have made it (mkstemp's are 0600)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise os_error(exc, str(path)) or DlperfError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange that also refuses nan and inf (a NaN passes every comparison click makes)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        import math

        number = click.FLOAT.convert(value, param, ctx)  # finite first: inf is not "out of range", it is no number
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)
