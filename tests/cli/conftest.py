"""Fixtures of the CLI tests: `dlperf` called in-process through `main` (its one-line errors and exit codes
as a user sees them), and two stored runs made by the real command in a subprocess."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import STUDIES, CliResult, run_cli

DlperfMain = Callable[..., CliResult]


def assert_one_line_error(res: CliResult, *fragments: str) -> None:
    """A failure as the user meets it: a non-zero exit, one `dlperf: error: ...` line, no traceback."""
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("dlperf: error: "), lines[0]
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture
def dlperf_main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                tmp_path: Path) -> Iterator[DlperfMain]:
    """`dlperf ARGS` in this process through `dlperf.cli.main`: its exit code, stdout and stderr.

    Runs in a scratch folder (reports/ land there) with 200 columns, as `run_cli` does; `db` sets DLPERF_DB.
    The SIGTERM and SIGHUP handlers that `run` installs are put back afterwards."""
    from dlperf.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("DLPERF_DB", raising=False)
    sigterm, sighup = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)

    def call(*args: str, db: Path | None = None) -> CliResult:
        if db is not None:
            monkeypatch.setenv("DLPERF_DB", str(db))
        capsys.readouterr()
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        else:
            raise AssertionError("dlperf.cli.main returned instead of exiting")
        out, err = capsys.readouterr()
        return CliResult(code if isinstance(code, int) else int(code is not None), out, err)

    yield call
    signal.signal(signal.SIGTERM, sigterm)
    signal.signal(signal.SIGHUP, sighup)


@pytest.fixture(scope="package")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliResult, CliResult]:
    """A store with two runs of the same small study (the second with --new), made by `dlperf run`."""
    db = tmp_path_factory.mktemp("cli") / "r.sqlite"
    study = str(STUDIES / "many_ok.yaml")
    first = run_cli("run", study, "--budget", "0.2", db=db)
    second = run_cli("run", study, "--budget", "0.2", "--new", db=db)
    return db, first, second
