"""One case as one `torchrun` job: start it, wait for it under a time-out, and classify how it ended.

The job is `python -m torch.distributed.run --standalone --nnodes 1 --nproc-per-node N --max-restarts 0 -m
dlperf.distributed.rank SPEC` (torchrun itself, from the installed torch): a fixed node count and process
count, no elastic restarts, so a case is exactly one attempt of exactly N processes. It runs in its own session;
every rank writes its pid at start and its result (`rank<R>.json`) at the end (`rank.py`).

How it ended, in this order: every rank wrote `ok` and torchrun exited 0: `ok` (where torchrun has not exited
TERM_GRACE_S after the last rank wrote ok, a hang in the job's teardown such as NCCL's destroy_process_group, it
is stopped and the job is still `ok`, with a note saying so). A rank wrote a failure: the
earliest one's status and reason (a rank whose peer died fails after it, with a connection error that is not
the cause); the job is stopped at once rather than left to hang in a collective. No result within the time-out:
`timeout`. A rank died without writing one: `oom` where the cgroup's OOM-kill count rose, else `crashed` with
torchrun's last lines. Stopping the job: SIGTERM to torchrun (it stops its ranks), then SIGKILL to torchrun's
and every rank's process group; ranks also die with torchrun (`PR_SET_PDEATHSIG`, `rank.py`), and torchrun dies
with the process that launched it (the case's worker: `PR_SET_PDEATHSIG` too), so a worker killed by its sweep
(an interrupted run, a time-out, SIGKILL) leaves no job behind. The classification and what is stored of a job
(`JobOutcome`) are `outcome.py`'s.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dlperf.core.janitor import release_group, watch_group
from dlperf.core.jobs import worker_age_s
from dlperf.core.scratch import scratch_dir
from dlperf.distributed.outcome import STOPPED, JobOutcome, classify, first_failure, oom_kills, stopped_note, tail
from dlperf.distributed.records import RankPayload, RankResult

__all__ = ["RANK_KINDS", "STOPPED", "JobOutcome", "RankKind", "RankSpec", "backend_for", "check_job", "launch",
           "remaining_s"]

#: The job kinds: the workloads whose case is one torchrun job (`runs_in_own_processes`), by their names (a test
#: checks the two agree); `faults` is the launcher's own test workload.
RankKind = Literal["ddp", "collectives", "faults"]
#: The module of each job kind's rank function: `run(spec, rank, world_size, device) -> dict` (`rank.py`).
RANK_KINDS: dict[RankKind, str] = {"ddp": "dlperf.distributed.ddp_rank",
                              "collectives": "dlperf.distributed.collectives_rank",
                              "faults": "dlperf.distributed.fault_rank"}  # faults: the launcher's own tests
#: Seconds the other ranks get to write their result after one rank failed, before the job is stopped.
FAILURE_GRACE_S = 3.0
#: Seconds torchrun gets to stop its ranks after SIGTERM, before everything is killed.
TERM_GRACE_S = 5.0
#: Seconds kept from the case's time-out for the worker's own work after the job (results, activity).
MARGIN_S = 10.0
POLL_S = 0.1
#: The thread-pool sizes a rank's libraries read at import: each rank gets `threads_per_rank` (torchrun's own
#: default, OMP_NUM_THREADS=1, is never left to chance).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class RankSpec(BaseModel):
    """What every rank of a job reads (the JSON file torchrun passes it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: RankKind
    payload: dict[str, Any] = Field(default_factory=dict)  # the kind's own parameters
    device: Literal["cpu", "cuda"]
    backend: Literal["gloo", "nccl"]
    threads_per_rank: int = Field(gt=0)
    seed: int = 0
    result_dir: str
    #: The process group's own time-out (a collective that waits longer fails): the job's time-out.
    timeout_s: float = Field(gt=0)


def backend_for(device: str) -> Literal["gloo", "nccl"]:
    """torch.distributed's backend for a device: NCCL on NVIDIA GPUs, gloo on CPUs."""
    return "nccl" if device.startswith("cuda") else "gloo"


def remaining_s(timeout_s: float, margin_s: float = MARGIN_S) -> float:
    """Seconds of this worker's case time-out left for a job: the time-out less what the worker has run so far
    (`core.jobs.worker_age_s`; outside a case worker it counts from now) and a margin for its own work after (at
    least 1 s). The parent kills the worker at the time-out; the job must end first, so that the worker itself
    stores the case as `timeout` with the job's reason (how many ranks were done; the ranks' figures are not
    kept), rather than being killed with no word from it."""
    used = worker_age_s() or 0.0
    return max(1.0, timeout_s - used - margin_s)


def torchrun_argv(world_size: int, spec_path: Path) -> list[str]:
    """The torchrun command of a one-node job of `world_size` processes running `rank.py` on `spec_path`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={world_size}", "--max-restarts=0", "--monitor-interval=0.2",
            "-m", "dlperf.distributed.rank", str(spec_path)]


def launch(kind: RankKind, payload: RankPayload, *, world_size: int, device: str,
           threads_per_rank: int, timeout_s: float, seed: int = 0) -> JobOutcome:
    """Run one torchrun job of `world_size` ranks of `kind` on `device` and return how it ended (never raises
    for the job's own failure; KeyboardInterrupt stops the job and propagates)."""
    with scratch_dir("dlperf-torchrun-") as tmp:  # a SIGKILLed worker's folder: removed by the next
        base = Path(tmp)
        spec = RankSpec(kind=kind, payload=dict(payload), device="cuda" if device.startswith("cuda") else "cpu",
                        backend=backend_for(device), threads_per_rank=threads_per_rank, seed=seed,
                        result_dir=str(base), timeout_s=timeout_s)
        spec_path = base / "spec.json"
        spec_path.write_text(spec.model_dump_json())
        argv = torchrun_argv(world_size, spec_path)
        env = dict(os.environ) | {k: str(threads_per_rank) for k in THREAD_VARS}
        # torchrun's own temporary folder (torchelastic_*) and the ranks' go inside this scratch folder: a SIGKILL
        # of torchrun leaves its folder behind, and this one is removed whatever happens (core/janitor.py)
        (base / "tmp").mkdir()
        env["TMPDIR"] = str(base / "tmp")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        log_path = base / "torchrun.log"
        oom_before = oom_kills()
        start = time.perf_counter()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, preexec_fn=_die_with(os.getpid()))
            watch_group(proc.pid)  # torchrun and its ranks: killed by this process's janitor if it is SIGKILLed
            vanished: dict[int, float] = {}
            try:
                ended, stopped_at = _wait(proc, base, world_size, start + timeout_s, vanished)
            except BaseException:
                _stop(proc, base)
                raise
            finally:
                release_group(proc.pid)
        wall_s = time.perf_counter() - start
        ranks = _rank_results(base, world_size)
        log_tail = tail(log_path)
        status, reason = classify(ended, proc.returncode, ranks, vanished, world_size, timeout_s, oom_before,
                                  log_tail, stopped_at)
        first = first_failure(ranks, vanished, stopped_at if ended == "timeout" else None)
        return JobOutcome(status, reason, ranks, world_size, wall_s, argv, log_tail,
                          cause=first[1] if first is not None and status != "ok" else None,
                          note=stopped_note(ranks, stopped_at) if status == "ok" else None)


PR_SET_PDEATHSIG = 1


def _die_with(parent_pid: int) -> Callable[[], None]:
    """torchrun's preexec_fn: SIGKILL it when the launching process ends (its own session keeps it from the
    terminal's signals, so nothing else would). Where the launcher ended before prctl took effect, it exits."""

    def preexec() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            return  # not Linux: the launcher's own stop still ends the job
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def _wait(proc: subprocess.Popen[bytes], base: Path, world_size: int, deadline: float,
          vanished: dict[int, float]) -> tuple[str, float | None]:
    """(how, when the launcher stopped the job: wall time, time.time(); None where it did not). how: 'exited',
    'failed' (a rank wrote a failure or died without a result; the job was stopped), 'timeout' (stopped at the
    deadline) or 'stopped_after_ok' (every rank wrote ok, and torchrun had not exited TERM_GRACE_S later).
    `vanished` gets the wall time at which each rank was first seen gone without having written a result: the
    launcher's own observation of a rank killed or exited."""
    failed_at: float | None = None
    all_ok_at: float | None = None
    while True:
        if proc.poll() is not None:
            return "exited", None
        now = time.perf_counter()
        if now >= deadline:
            stopped_at = time.time()
            _stop(proc, base)
            return "timeout", stopped_at
        results = _rank_results(base, world_size)
        done = {r.get("rank") for r in results}
        for rank, pid in _started_ranks(base).items():
            if rank not in done and rank not in vanished and not _alive(pid):
                if not (base / f"rank{rank}.json").exists():  # it may have written just now
                    vanished[rank] = time.time()
        if failed_at is None and (vanished or any(r.get("status") not in ("ok", STOPPED) for r in results)):
            failed_at = now
        if failed_at is not None and now - failed_at >= FAILURE_GRACE_S:
            stopped_at = time.time()
            _stop(proc, base)
            return "failed", stopped_at
        if all_ok_at is None and len(results) == world_size and all(r.get("status") == "ok" for r in results):
            all_ok_at = now
        if all_ok_at is not None and now - all_ok_at >= TERM_GRACE_S:
            stopped_at = time.time()
            _stop(proc, base)
            return "stopped_after_ok", stopped_at
        time.sleep(POLL_S)


def _started_ranks(base: Path) -> dict[int, int]:
    """rank -> pid, from the pid files the ranks wrote at start."""
    out = {}
    for path in base.glob("rank*.pid"):
        try:
            out[int(path.stem.removeprefix("rank"))] = int(path.read_text())
        except (OSError, ValueError):
            continue
    return out


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not yet reaped by torchrun, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _stop(proc: subprocess.Popen[bytes], base: Path) -> None:
    """SIGTERM to torchrun (it stops its ranks), then SIGKILL to its and every rank's process group."""
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)
    for pid in _rank_pids(base):
        _signal_group(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _rank_pids(base: Path) -> list[int]:
    """The pids the ranks wrote at start, where that process is still a rank of this job (not a reused pid)."""
    out = []
    for pid in _started_ranks(base).values():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(base).encode() in cmdline:
            out.append(pid)
    return out


def _rank_results(base: Path, world_size: int) -> list[RankResult]:
    """Every result file the ranks wrote, in rank order (a rank writes its file atomically)."""
    out: list[RankResult] = []
    for r in range(world_size):
        path = base / f"rank{r}.json"
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return out


def check_job(device: str, world_size: int) -> None:
    """UnsupportedError (with the reason) where this machine cannot run a job of `world_size` ranks on `device`:
    torch without torch.distributed, the backend missing from this build, fewer GPUs than ranks."""
    import torch
    import torch.distributed as dist

    from dlperf.frameworks import UnsupportedError

    if not dist.is_available():
        raise UnsupportedError("this torch build has no torch.distributed")
    backend = backend_for(device)
    if not (dist.is_nccl_available() if backend == "nccl" else dist.is_gloo_available()):
        raise UnsupportedError(f"this torch build has no {backend} backend")
    if backend == "nccl":
        gpus = torch.cuda.device_count()
        if world_size > gpus:
            raise UnsupportedError(f"{world_size} ranks need {world_size} GPUs (one per rank); this machine has "
                                   f"{gpus}")

