"""Shared fixtures: a seeded fake clock, temporary databases, and a CLI runner that runs `dlperf` as a user does."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.postgres_server import postgres_url  # noqa: F401  (a session fixture: one server for the suite)

STUDIES = Path(__file__).parent / "studies"


class FakeClock:
    """A clock that moves only when told: the timer's statistics become exact."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def advance(self, dt: float) -> None:
        self.now += dt


def session_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder of this test session's, shared by its pytest-xdist processes (beside their own folders)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session", autouse=True)
def private_export_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every test, and every dlperf process a test starts, uses the suite's own cache (ONNX exports, the clock
    probe's build, the CPU peak), never the user's `~/.cache/dlperf` (tests that check the cache set their own per
    test). The suite's test processes (pytest-xdist) share one, as two users' runs share theirs: an export one
    made is read by the others (`onnx_export.entry_lock` keeps them from writing one entry at once), and the peak
    is measured once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DLPERF_CACHE_DIR", str(session_folder(tmp_path_factory, "dlperf-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def private_temp_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The temporary folder of the suite's test processes and of every process they start (TMPDIR,
    `tempfile.tempdir`): a folder of this session's, which pytest removes with its older sessions. Without it each
    run of the suite left about 250 of `run_cli`'s scratch folders in the machine's /tmp, never removed, and any
    file a library leaves in the temporary folder stayed there too. The test processes share it as they would
    share /tmp."""
    folder = session_folder(tmp_path_factory, "tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def earlier_objects_frozen() -> None:
    """What earlier tests left alive (the frameworks' modules above all: torch, TensorFlow and JAX hold about
    half a million objects) is moved out of the garbage collector's sight before each test, after one collection
    of what the last test made. A full collection then costs what the test itself made: the timer collects
    before it times (`timing.timer.measure`) and the fuzz harness after each command, and in a test process
    that had imported the frameworks each such collection took 0.2-0.6 s (77 s of the fuzz file's 237 s, 24 s
    of the timer's tests, on the 2-core VM). Nothing the test made is frozen: its own garbage is collected
    as before."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


def tempdir_as_default(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A module fixture's body: a new folder of the test session made the default temporary folder of this process
    (`tempfile.tempdir`: the compile caches' `dlperf-compile-*` folders are made there), the old one restored after.
    """
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp(name))
    yield Path(tempfile.tempdir)
    tempfile.tempdir = before


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, db: Path | None = None, timeout: float = 240, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> CliResult:
    """Run `python -m dlperf.cli ARGS` in a subprocess, as a user would, in a fresh folder (so that files dlperf
    writes beside the user, such as reports/, stay out of the repo) in the session's temporary folder."""
    cwd = cwd or Path(tempfile.mkdtemp(prefix="dlperf-cli-"))
    full_env = dict(os.environ, COLUMNS="200", **(env or {}))
    if db is not None:
        full_env["DLPERF_DB"] = str(db)
    proc = subprocess.run([sys.executable, "-m", "dlperf.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def torch_counted_flops(fn) -> int:
    """FLOPs that torch's FlopCounterMode (an independent counter) sees in one call of `fn`."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


#: The slowest test files (seconds of their tests in one xdist process of a fresh clone's `make test` on the 2-core
#: AMD VM, three processes at once, 2026-11-28), started first when `make test` runs files in parallel
#: (`-n TEST_WORKERS --dist loadfile --no-loadscope-reorder`), so that no long file starts last while the others
#: have nothing left: a scheduling hint only; a file not named here runs after these, in order.
SLOW_FILES_FIRST = (
    "tests/cli/test_readme.py",  # 270
    "tests/cli/test_bench.py",  # 184
    "tests/workloads/test_cnn.py",  # 117
    "tests/runner/test_resume.py",  # 83
    "tests/browser/test_report_page.py",  # 75
    "tests/cli/test_bench_compile.py",  # 73
    "tests/workloads/test_maxbatch_workloads.py",  # 60
    "tests/cli/test_gpu_kit_install.py",  # 57
    "tests/cli/test_bench_hf.py",  # 56
    "tests/workloads/test_dtype.py",  # 54
    "tests/cli/test_bench_maxbatch.py",  # 53
    "tests/serving/test_loadgen_runs.py",  # 52
    "tests/runner/test_two_resumers.py",  # 51
    "tests/cli/test_bench_compile_train.py",  # 44
    "tests/workloads/test_model_tf_jax.py",  # 39
    "tests/models/test_onnx_export.py",  # 37
    "tests/cli/test_bad_inputs.py",  # 37
    "tests/fleet/test_fleet.py",  # 36
    "tests/cli/test_bench_recommend.py",  # 36
    "tests/cli/test_gpu_check.py",  # 35
    "tests/distributed/test_launch.py",  # 35
    "tests/models/test_transformer_model_jax.py",  # 35
    "tests/distributed/test_ddp.py",  # 33
    "tests/hardware/test_roofline.py",  # 33
    "tests/hardware/test_peaks.py",  # 31
    "tests/adapters/test_compiler_modes.py",  # 30
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist process the slowest files come first (SLOW_FILES_FIRST). GPU tests run wherever a GPU
    exists and are skipped, with the reason, only where none does."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {path: k for k, path in enumerate(SLOW_FILES_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest in order
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The machine the suite ran on, last, beside the summary that CI's log keeps: a test that fails on one
    machine and not another (issue 28) is then read against which CPU, ISA and CPU limits it had."""
    try:
        from dlperf.hardware import cpu_limits, probe

        flags = probe.cpu_flag_set()
        isa = [name for name, flag in (("AVX2", "avx2"), ("AVX-512", "avx512f"), ("AMX", "amx_tile"))
               if flag in flags]
        logical = os.cpu_count() or 0
        line = (f"machine: {probe.cpu_model()}; {probe.physical_cores()} physical cores, {logical} logical; "
                f"ISA {', '.join(isa) or 'none of AVX2, AVX-512, AMX'}; "
                f"{cpu_limits.describe(cpu_limits.read_limits(), logical)}; load average {os.getloadavg()[0]:.1f}")
    except Exception as exc:  # a line for the log, never a reason for the run to fail
        line = f"machine: not read ({type(exc).__name__}: {exc})"
    terminalreporter.write_line(line)
