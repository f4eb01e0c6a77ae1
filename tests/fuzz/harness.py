"""The fuzz harness's machinery: `dlperf` called in this process (its exit code, stdout and stderr) under a time
limit per example, the store's bytes hashed before and after, and the property every input must keep: exit 0,
or one `dlperf: error:` line with an exit code the README documents; never 70, never a traceback, never a hang,
and a refused command leaves the store byte-for-byte as it was and creates no store."""

from __future__ import annotations

import gc
import hashlib
import io
import os
import re
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
#: Seconds one example may take before it counts as a hang (a refusal takes well under one; a report of the
#: fixture's 2-case run a few).
EXAMPLE_LIMIT_S = 30.0


class ExampleHung(BaseException):
    """An example ran past EXAMPLE_LIMIT_S: a BaseException, so that no `except Exception` in dlperf hides it."""


def documented_exit_codes(readme: Path = README) -> frozenset[int]:
    """The exit codes of the README's exit-code table (a Markdown table whose header names 'exit' and whose
    first column is the code); where the README has no such table, the codes its prose names: 0, 1 (a
    regression found by --fail-on-regression) and 2 (a one-line error)."""
    codes: set[int] = set()
    in_table = False
    for line in readme.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        if not in_table:
            in_table = "exit" in line.lower() and not re.match(r"\|\s*`?\d+`?\s*\|", line)
            continue
        m = re.match(r"\|\s*`?(\d+)`?\s*\|", line)
        if m:
            codes.add(int(m.group(1)))
    return frozenset(codes or {0, 1, 2})


@dataclass(frozen=True)
class Outcome:
    """One `dlperf ARGS` as the user meets it."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        """The command (long arguments cut, with their length), its exit code and stderr's end."""
        args = " ".join(repr(a) if len(a) <= 80 else f"{a[:60]!r}...({len(a)} chars)" for a in self.args)
        return f"dlperf {args} -> exit {self.code}\nstderr: {self.stderr[-2000:]!r}"


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ExampleHung in the main thread once `seconds` pass: a watchdog thread sends SIGUSR1 to the main
    thread, which also breaks a blocking system call (a FIFO's open, a lock wait). pytest-timeout's SIGALRM is
    left alone; it still guards the whole test."""
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main, "the time limit needs the main thread"

    def on_signal(signum: int, frame: object) -> None:
        raise ExampleHung(f"the example ran past its {seconds:.0f} s limit")

    previous = signal.signal(signal.SIGUSR1, on_signal)
    timer = threading.Timer(seconds, signal.pthread_kill, args=(main, signal.SIGUSR1))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)


def call_dlperf(*args: str, cwd: Path, limit_s: float = EXAMPLE_LIMIT_S) -> Outcome:
    """`dlperf ARGS` through `dlperf.cli.main` in this process, in `cwd`, its output captured. The signal
    handlers `run` installs, and the working folder, are put back afterwards."""
    from dlperf.cli import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    here = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    try:
        os.chdir(cwd)
        with time_limit(limit_s), redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except ExampleHung as exc:
        raise AssertionError(f"hang: dlperf {' '.join(map(repr, args))}: {exc}\nstderr so far: "
                             f"{err.getvalue()[-2000:]!r}") from None
    finally:
        os.chdir(here)
        for s, h in handlers.items():
            signal.signal(s, h)
        gc.collect()  # the command's engines go, closing their connections: a WAL store is checkpointed now
        gc.freeze()  # what survived it (modules the command imported) is not scanned by the next example's
    assert code is not None, f"dlperf.cli.main returned instead of exiting: {args!r}"
    return Outcome(tuple(args), code, out.getvalue(), err.getvalue())


def store_digest(path: Path) -> str | None:
    """SHA-256 of a SQLite store's bytes, its WAL file's included; None where there is no store."""
    if not path.exists():
        return None
    h = hashlib.sha256(path.read_bytes())
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        h.update(b"\0wal\0" + wal.read_bytes())
    return h.hexdigest()


def fresh_copy(source: Path, target: Path) -> Path:
    """A private copy of a store (each example that may write gets its own)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def check_outcome(res: Outcome, *, store: Path | None = None, before: str | None = None,
                  regression_exit: bool = False) -> None:
    """The property: exit 0, or one `dlperf: error:` line and a documented code; never 70 nor a traceback; a
    refused command leaves `store` (hashed `before` it ran) as it was, and creates none where there was none.
    `regression_exit`: exit 1 is a result here (--fail-on-regression found one), not an error."""
    said = res.describe()
    assert "Traceback (most recent call last)" not in res.stdout + res.stderr, said
    assert res.code != 70 and "internal error" not in res.stderr, said
    assert res.code in documented_exit_codes(), f"undocumented exit code: {said}"
    if res.code == 0 or (regression_exit and res.code == 1):
        assert "dlperf: error:" not in res.stderr, said
        return
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlperf: error: "), f"not one error line: {said}"
    if store is not None:
        assert store_digest(store) == before, f"a refused command changed the store {store}: {said}"


def escaped(base: Path, allowed: set[str]) -> list[str]:
    """What appeared in `base` besides `allowed` (a path built from data that left its folder)."""
    return sorted(p.name for p in base.iterdir() if p.name not in allowed)
