"""Start a worker process, wait for it under a time-out, and classify how it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.core.janitor import release_group, watch_group
from dlperf.core.jobs import WORKER_STARTED_AT_ENV, Job, as_job
from dlperf.core.scratch import scratch_dir
from dlperf.hardware.probe import env_threads_vars
from dlperf.meters.oom import oom_kill_count
from dlperf.runner.worker_result import WorkerResult

__all__ = ["WorkerOutcome", "classify_exit", "oom_kill_count", "run_worker"]


@dataclass
class WorkerOutcome:
    """How a worker ended: a result dict (its own or one made from its exit status)."""

    result: WorkerResult
    wall_s: float


def _stderr_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(t.strip() for t in text[-lines:] if t.strip())


def _wrapper_log_tail(tmp: Path, lines: int = 3) -> str:
    """The last lines a profiler wrapping the worker wrote to its log in `tmp` (ncu logs its errors to its
    --log-file, not to stderr): the reason a wrapped worker left no result."""
    said = [ln.strip() for f in sorted(tmp.glob("*.csv")) for ln in f.read_text(errors="replace").splitlines()
            if ln.startswith("==")]
    return " | ".join(said[-lines:])


def classify_exit(returncode: int, *, oom_kills_before: int | None, oom_kills_after: int | None,
                  stderr_tail: str) -> WorkerResult:
    """A result for a worker that exited without writing one."""
    tail = f" (stderr: {stderr_tail})" if stderr_tail else ""
    if returncode < 0:
        sig = -returncode
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig == signal.SIGKILL and (
            oom_kills_before is not None and oom_kills_after is not None and oom_kills_after > oom_kills_before
        ):
            return {"status": "oom", "reason": "killed by the kernel OOM killer (cgroup oom_kill count rose)"}
        return {"status": "crashed", "reason": f"worker killed by {name}{tail}"}
    return {"status": "error", "reason": f"worker exited with code {returncode} without a result{tail}"}


def run_worker(job: Job | dict[str, Any], *, timeout_s: float, threads: int | None = None,
               wrap: Callable[[list[str], Path], list[str]] | None = None) -> WorkerOutcome:
    """Run `job` in a fresh `python -m dlperf.runner.worker` and return its outcome.

    A plain dict is read as the Job it describes (its `mode` picks the type).

    The worker gets its own session, so a Ctrl-C in the terminal reaches only the
    sweep, which then kills the worker itself. On a time-out the whole process
    group is killed (a framework may have started helpers). `wrap(argv, tmpdir)`
    may prefix the command with a profiler (ncu) that writes its output in tmpdir;
    the result then carries those files' text under `_tmpdir_files`.
    """
    with scratch_dir("dlperf-worker-") as tmp:  # a SIGKILLed sweep's folder: removed by the next
        result_path = Path(tmp) / "result.json"
        job = as_job(job).model_copy(update={"result_path": str(result_path), "parent_pid": os.getpid()})
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(job.model_dump_json())
        stderr_path = Path(tmp) / "stderr.txt"
        env = dict(os.environ)
        if threads:
            env.update(env_threads_vars(threads))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        oom_before = oom_kill_count()
        env[WORKER_STARTED_AT_ENV] = repr(time.time())
        start = time.perf_counter()
        with open(stderr_path, "wb") as err:
            argv = [sys.executable, "-m", "dlperf.runner.worker", str(spec_path)]
            if wrap is not None:
                argv = wrap(argv, Path(tmp))
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
            )
            watch_group(proc.pid)  # its own session: killed by this process's janitor if this one is SIGKILLed
            try:
                returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return WorkerOutcome(
                    {"status": "timeout", "reason": f"no result within the {timeout_s:g} s time-out; worker killed"},
                    time.perf_counter() - start,
                )
            except BaseException:  # Ctrl-C or SIGTERM in the sweep: take the worker down with us
                _kill_group(proc)
                raise
            finally:
                release_group(proc.pid)
        wall_s = time.perf_counter() - start
        if result_path.exists():
            try:
                result: WorkerResult = json.loads(result_path.read_text())
                if wrap is not None:
                    result["_tmpdir_files"] = {p.name: p.read_text(errors="replace") for p in Path(tmp).glob("*.csv")}
                return WorkerOutcome(result, wall_s)
            except (OSError, json.JSONDecodeError) as exc:
                return WorkerOutcome({"status": "error", "reason": f"unreadable worker result: {exc}"}, wall_s)
        said = _stderr_tail(stderr_path)
        if not said and wrap is not None and (logged := _wrapper_log_tail(Path(tmp))):
            said = f"the profiler's log: {logged}"
        result = classify_exit(
            returncode,
            oom_kills_before=oom_before,
            oom_kills_after=oom_kill_count(),
            stderr_tail=said,
        )
        return WorkerOutcome(result, wall_s)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
