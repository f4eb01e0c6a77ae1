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
(an interrupted run, a time-out, SIGKILL) leaves no job behind.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dlperf.core.status import CaseEnded, CaseStatus
from dlperf.units import format_time

#: The module of each job kind's rank function: `run(spec, rank, world_size, device) -> dict` (`rank.py`).
RANK_KINDS: dict[str, str] = {"ddp": "dlperf.distributed.ddp_rank",
                              "collectives": "dlperf.distributed.collectives_rank",
                              "faults": "dlperf.distributed.fault_rank"}  # faults: the launcher's own tests
#: What is stored of each rank of a job that ended ok (`JobOutcome.rank_records`).
RANK_RECORD = ("rank", "host", "pid", "device", "peak_rss_bytes", "peak_device_mem_bytes")
#: Seconds the other ranks get to write their result after one rank failed, before the job is stopped.
FAILURE_GRACE_S = 3.0
#: Seconds torchrun gets to stop its ranks after SIGTERM, before everything is killed.
TERM_GRACE_S = 5.0
#: Seconds kept from the case's time-out for the worker's own work after the job (results, activity).
MARGIN_S = 10.0
POLL_S = 0.1
#: A rank seen gone without a result counts as having died up to this many seconds before it was seen (the
#: poll's period and scheduling), when its death is set against a peer's failure that reports it.
VANISH_SLACK_S = 0.5
#: What a rank writes when torchrun (or the launcher) stops it with SIGTERM: neither ok nor a failure of its own.
STOPPED = "stopped"
#: The thread-pool sizes a rank's libraries read at import: each rank gets `threads_per_rank` (torchrun's own
#: default, OMP_NUM_THREADS=1, is never left to chance).
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class RankSpec(BaseModel):
    """What every rank of a job reads (the JSON file torchrun passes it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["ddp", "collectives", "faults"]
    payload: dict[str, Any] = Field(default_factory=dict)  # the kind's own parameters
    device: Literal["cpu", "cuda"]
    backend: Literal["gloo", "nccl"]
    threads_per_rank: int = Field(gt=0)
    seed: int = 0
    result_dir: str
    #: The process group's own time-out (a collective that waits longer fails): the job's time-out.
    timeout_s: float = Field(gt=0)


@dataclass
class JobOutcome:
    """How a job ended: its status, the reason, and every result a rank wrote (rank order)."""

    status: CaseStatus
    reason: str | None
    ranks: list[dict[str, Any]]
    world_size: int
    wall_s: float
    command: list[str]
    log_tail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: The result of the rank whose failure ended the job (the earliest, `_first_failure`), where it wrote one.
    cause: dict[str, Any] | None = None
    #: What the launcher did to a job that ended ok otherwise than by itself (stopped after every rank wrote ok).
    note: str | None = None

    def launcher_record(self) -> dict[str, Any]:
        """What is stored of the launcher with a case that ended ok: the command, its wall time, the note."""
        return {"command": self.command, "wall_s": self.wall_s, "note": self.note}

    def rank_records(self) -> list[dict[str, Any]]:
        """Each rank's identity and memory, stored with the case (rank order)."""
        return [{k: r.get(k) for k in RANK_RECORD} for r in self.ranks]

    def footprint(self, where: str) -> dict[str, Any]:
        """The case's top-level memory figures from its ranks (`where`: the stored key of their records, e.g.
        metrics['ddp']['ranks']): the largest peak RSS and the largest device allocator peak over the ranks, with
        their sources; None with the reason where no rank measured one (CPU ranks: no allocator statistics)."""
        rss = [r["peak_rss_bytes"] for r in self.ranks if r.get("peak_rss_bytes") is not None]
        dev = [r["peak_device_mem_bytes"] for r in self.ranks if r.get("peak_device_mem_bytes") is not None]
        return {"peak_rss_bytes": max(rss) if rss else None,
                "peak_rss_source": (f"ranks' peak RSS (VmHWM, max over ranks; each in {where}); the worker's own: "
                                    f"worker_peak_rss_bytes" if rss else f"no rank measured its RSS ({where})"),
                "peak_device_mem_bytes": max(dev) if dev else None,
                "peak_device_mem_source": (f"ranks' allocator peak (max): torch.cuda.max_memory_allocated of each "
                                           f"rank, in {where}" if dev else
                                           f"measured per rank: {where}; none there (CPU ranks: torch keeps no CPU "
                                           f"allocator statistics)")}

    def describe(self) -> dict[str, Any]:
        """What is stored with a failed case: the command, how long it ran, each rank's status and reason, and
        the traceback of the rank whose failure ended the job (`traceback`, which `dlperf show --errors` prints),
        where that rank caught its exception (a rank killed, or gone without a result, has none)."""
        out: dict[str, Any] = {
            "launcher": {"command": self.command, "wall_s": self.wall_s, "world_size": self.world_size,
                         "log_tail": self.log_tail},
            "ranks": [{k: r.get(k) for k in ("rank", "status", "reason", "host", "pid", "peak_rss_bytes",
                                             "peak_device_mem_bytes")} for r in self.ranks]}
        if self.cause is not None and self.cause.get("traceback"):
            out["traceback"] = f"rank {self.cause.get('rank')} of {self.world_size}:\n{self.cause['traceback']}"
        return out

    def raise_for_status(self) -> None:
        """CaseEnded with the job's status and reason (and `describe()` as the case's metrics) unless ok."""
        if self.status != "ok":
            raise CaseEnded(self.status, self.reason or f"torchrun job ended {self.status}", self.describe())


def backend_for(device: str) -> Literal["gloo", "nccl"]:
    """torch.distributed's backend for a device: NCCL on NVIDIA GPUs, gloo on CPUs."""
    return "nccl" if device.startswith("cuda") else "gloo"


def remaining_s(timeout_s: float, margin_s: float = MARGIN_S) -> float:
    """Seconds of this worker's case time-out left for a job: the time-out less what this process has run so far
    and a margin for its own work after (at least 1 s). The parent kills the worker at the time-out; the job must
    end first, so that the worker itself stores the case as `timeout` with the job's reason (how many ranks were
    done; the ranks' figures are not kept), rather than being killed with no word from it."""
    import psutil

    used = time.time() - psutil.Process().create_time()
    return max(1.0, timeout_s - used - margin_s)


def torchrun_argv(world_size: int, spec_path: Path) -> list[str]:
    """The torchrun command of a one-node job of `world_size` processes running `rank.py` on `spec_path`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
            f"--nproc-per-node={world_size}", "--max-restarts=0", "--monitor-interval=0.2",
            "-m", "dlperf.distributed.rank", str(spec_path)]


def launch(kind: Literal["ddp", "collectives", "faults"], payload: dict[str, Any], *, world_size: int, device: str,
           threads_per_rank: int, timeout_s: float, seed: int = 0) -> JobOutcome:
    """Run one torchrun job of `world_size` ranks of `kind` on `device` and return how it ended (never raises
    for the job's own failure; KeyboardInterrupt stops the job and propagates)."""
    with tempfile.TemporaryDirectory(prefix="dlperf-torchrun-") as tmp:
        base = Path(tmp)
        spec = RankSpec(kind=kind, payload=payload, device="cuda" if device.startswith("cuda") else "cpu",
                        backend=backend_for(device), threads_per_rank=threads_per_rank, seed=seed,
                        result_dir=str(base), timeout_s=timeout_s)
        spec_path = base / "spec.json"
        spec_path.write_text(spec.model_dump_json())
        argv = torchrun_argv(world_size, spec_path)
        env = dict(os.environ) | {k: str(threads_per_rank) for k in THREAD_VARS}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        log_path = base / "torchrun.log"
        oom_before = _oom_kills()
        start = time.perf_counter()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, preexec_fn=_die_with(os.getpid()))
            vanished: dict[int, float] = {}
            try:
                ended, stopped_at = _wait(proc, base, world_size, start + timeout_s, vanished)
            except BaseException:
                _stop(proc, base)
                raise
        wall_s = time.perf_counter() - start
        ranks = _rank_results(base, world_size)
        tail = _tail(log_path)
        status, reason = _classify(ended, proc.returncode, ranks, vanished, world_size, timeout_s, oom_before, tail,
                                   stopped_at)
        first = _first_failure(ranks, vanished, stopped_at if ended == "timeout" else None)
        note = None
        if status == "ok" and stopped_at is not None:
            waited = stopped_at - max(r.get("finished_at", stopped_at) for r in ranks)
            note = (f"every rank wrote ok, but torchrun had not exited {waited:.1f} s after the last one did (a hang "
                    f"in the job's teardown, e.g. destroy_process_group): the launcher stopped it")
        return JobOutcome(status, reason, ranks, world_size, wall_s, argv, tail,
                          cause=first[1] if first is not None and status != "ok" else None, note=note)


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
    for path in base.glob("rank*.pid"):
        try:
            pid = int(path.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if str(base).encode() in cmdline:
            out.append(pid)
    return out


def _rank_results(base: Path, world_size: int) -> list[dict[str, Any]]:
    """Every result file the ranks wrote, in rank order (a rank writes its file atomically)."""
    out = []
    for r in range(world_size):
        path = base / f"rank{r}.json"
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return out


def _classify(ended: str, returncode: int | None, ranks: list[dict[str, Any]], vanished: dict[int, float],
              world_size: int, timeout_s: float, oom_before: int | None, tail: str,
              stopped_at: float | None = None) -> tuple[CaseStatus, str | None]:
    """The job's status from its first observed failure: a rank's own failure (its result file) or a rank seen
    gone without a result (`vanished`), whichever came first; a peer that fails after it (a connection reset
    by the dead rank) is not the cause, nor is a rank stopped by torchrun after another failed (`STOPPED`).
    A job stopped at its time-out (`stopped_at`) is `timeout` unless a rank failed before the stop: a rank that
    fails at or after it (a peer's connection reset by the stop) is the stop's doing, not the job's."""
    failure = _first_failure(ranks, vanished, stopped_at if ended == "timeout" else None)
    if failure is not None:
        rank, first = failure
        if first is not None:
            return first.get("status", "error"), f"rank {rank}: {first.get('reason')}"
        if _oom_rose(oom_before):
            return "oom", f"rank {rank} was killed by the kernel OOM killer (cgroup oom_kill count rose)"
        where = f" (torchrun: {tail})" if tail else ""
        return "crashed", f"rank {rank} ended without a result (killed, or exited){where}"
    every_ok = len(ranks) == world_size and all(r.get("status") == "ok" for r in ranks)
    if every_ok and ended in ("stopped_after_ok", "timeout"):
        return "ok", None  # every rank's result is whole; only torchrun's own exit was missing
    if ended == "timeout":
        done = sum(r.get("status") == "ok" for r in ranks)
        return "timeout", (f"the torchrun job gave no result within {format_time(timeout_s)} ({done} of "
                           f"{world_size} ranks done); stopped")
    if returncode == 0 and len(ranks) == world_size and all(r.get("status") == "ok" for r in ranks):
        return "ok", None
    missing = sorted(set(range(world_size)) - {r.get("rank") for r in ranks})
    if _oom_rose(oom_before):
        return "oom", f"rank(s) {missing} killed by the kernel OOM killer (cgroup oom_kill count rose)"
    where = f" (torchrun: {tail})" if tail else ""
    return "crashed", f"rank(s) {missing} ended without a result; torchrun exited {returncode}{where}"


def _first_failure(ranks: list[dict[str, Any]], vanished: dict[int, float],
                   before: float | None = None) -> tuple[int, dict[str, Any] | None] | None:
    """(rank, its result or None where it vanished without one) of the earliest failure observed, None if none:
    a rank's own failure (its result's `finished_at`) or a rank seen gone (`vanished`, less the poll's slack);
    with `before` (wall time), only those that happened before it."""
    events = [(r.get("finished_at", 0.0), r.get("rank"), r) for r in ranks if r.get("status") not in ("ok", STOPPED)]
    events += [(t - VANISH_SLACK_S, rank, None) for rank, t in vanished.items()]
    if before is not None:
        events = [e for e in events if e[0] < before]
    if not events:
        return None
    _, rank, first = min(events, key=lambda e: (e[0], e[1] if e[1] is not None else -1))
    return rank, first


def _oom_rose(before: int | None) -> bool:
    after = _oom_kills()
    return before is not None and after is not None and after > before


def _oom_kills() -> int | None:
    from dlperf.meters.oom import oom_kill_count

    return oom_kill_count()


def _tail(path: Path, lines: int = 4) -> str:
    """torchrun's last meaningful lines, one line (its banner and warnings left out)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    keep = [t.strip() for t in text if t.strip() and "*****" not in t and "OMP_NUM_THREADS" not in t]
    return " | ".join(keep[-lines:])


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

