"""Fixtures of the CLI tests: `dlperf` called in-process through `main` (its one-line errors and exit codes
as a user sees them), and two stored runs made by the real command in a subprocess.

No CLI test can reach the user's own results store: DLPERF_DB is unset and the data folder the default store
lives in (XDG_DATA_HOME) is a scratch one, for this process and every `dlperf` it starts; and a test that used
the default store at all (a call without `db=`, `--db` or DLPERF_DB that opened a store) fails, naming it."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


#: The environment variables that place the default store (`dlperf.store.db.default_db_path`).
STORE_ENV = ("DLPERF_DB", "XDG_DATA_HOME")


#: A model file that raises on import, as every source test has one.
RAISES_ON_IMPORT = "raise RuntimeError('broken on import')\n"


def user_model_files(folder: Path, models: str, onnx_name: str, onnx_bytes: bytes) -> Path:
    """A user's folder for the source tests: `models.py` (the test's modules), `raises.py` (raises on import) and
    one `.onnx` file that is not a model (named and filled as the test needs)."""
    (folder / "models.py").write_text(models)
    (folder / "raises.py").write_text(RAISES_ON_IMPORT)
    (folder / onnx_name).write_bytes(onnx_bytes)
    return folder


@pytest.fixture(scope="package", autouse=True)
def scratch_data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """DLPERF_DB unset and XDG_DATA_HOME a scratch folder while the CLI tests run (set in os.environ, so the
    subprocesses they start inherit it): the default store is never the user's; its previous values come back."""
    saved = {key: os.environ.get(key) for key in STORE_ENV}
    home = tmp_path_factory.mktemp("xdg-data")
    os.environ.pop("DLPERF_DB", None)
    os.environ["XDG_DATA_HOME"] = str(home)
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def default_store_unused(scratch_data_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Fails the test that used the default store: in this process (the path was asked for with no DLPERF_DB
    set), or in a `dlperf` it started (something was written under the scratch data folder, then removed so
    that the next test starts clean). Yields the uses seen in this process (a test of the guard clears them)."""
    from dlperf.store import db as store_db

    used: list[Path] = []
    real = store_db.default_db_path

    def watched() -> Path:
        path = real()
        if not os.environ.get("DLPERF_DB"):
            used.append(path)
        return path

    monkeypatch.setattr(store_db, "default_db_path", watched)
    yield used
    written = sorted(str(p.relative_to(scratch_data_home)) for p in scratch_data_home.rglob("*"))
    for child in scratch_data_home.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    assert not used, f"this test used the default store {used[0]}: give it its own (db=, --db or DLPERF_DB)"
    assert not written, f"a dlperf this test started wrote under the default data folder: {written}"


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


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CliResult, CliResult]:
    """A store with two runs of the same small study (the second with --new), made by `dlperf run`, both with
    --threads 1: without it each run's count follows the machine's load at its start, and two runs seconds apart
    on a busy machine can differ (the tests that compare them would compare thread counts). Built once per
    `make test`: the files that use it are spread over the xdist processes, so the first to need it builds it in
    the session's folder common to them (under a lock) and the others read it there (26-36 s a build on the
    2-core VM). Its users only read it; a test that changes a store copies it first."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if worker else base) / "two-runs"  # pytest-N/: this session's, every xdist process's
    folder.mkdir(exist_ok=True)
    db, saved = folder / "r.sqlite", folder / "results.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if not saved.exists():
            study = str(STUDIES / "many_ok.yaml")
            runs = [run_cli("run", study, "--budget", "0.2", "--threads", "1", *extra, db=db)
                    for extra in ((), ("--new",))]
            saved.write_text(json.dumps([dataclasses.asdict(r) for r in runs]))
    first, second = (CliResult(**r) for r in json.loads(saved.read_text()))
    return db, first, second


def variant_of(key: str) -> str:
    """The variant in a case key: eager, the default, is left out of a key (ModelParams.OMIT_AT_DEFAULT)."""
    return key.split("variant=")[1].split(",")[0] if "variant=" in key else "eager"


def check_in_this_process(module: str, params: Any, doing: str, timeout_s: float) -> str:
    """`check.in_fresh_process` for the preflight, run here: `check.main` on the same arguments, its stderr's last
    line as the error (the hub offline for its duration only, as in the fresh process)."""
    from dlperf.errors import DlperfError
    from dlperf.workloads.model import check

    assert module == "dlperf.workloads.model.check", module
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for name, value in check.OFFLINE.items():
            mp.setenv(name, value)
        code = check.main([module, params.model_dump_json()])
    if code != 0:
        lines = err.getvalue().strip().splitlines()
        raise DlperfError(lines[-1] if lines else f"{doing} failed (exit {code})")
    return out.getvalue()


@pytest.fixture
def preflight_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dlperf bench`'s and `maxbatch SOURCE`'s preflight check run in the test's process (`check_in_this_process`),
    for tests of its refusals: each fresh process imported torch (and transformers for hf:), about 1.5 s of CPU."""
    from dlperf.workloads.model import check

    monkeypatch.setattr(check, "in_fresh_process", check_in_this_process)
