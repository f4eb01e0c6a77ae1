"""How a torchrun job ended (`launch.py` waits for it): its status from the ranks' result files, the ranks seen
gone, torchrun's exit and the cgroup's OOM-kill count, and what is stored of it (`JobOutcome`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dlperf.core.status import CaseEnded, CaseStatus
from dlperf.distributed.records import Footprint, LauncherRecord, RankRecord, RankResult
from dlperf.units import format_time

#: A rank seen gone without a result counts as having died up to this many seconds before it was seen (the
#: poll's period and scheduling), when its death is set against a peer's failure that reports it.
VANISH_SLACK_S = 0.5
#: What a rank writes when torchrun (or the launcher) stops it with SIGTERM: neither ok nor a failure of its own.
STOPPED = "stopped"


@dataclass
class JobOutcome:
    """How a job ended: its status, the reason, and every result a rank wrote (rank order)."""

    status: CaseStatus
    reason: str | None
    ranks: list[RankResult]
    world_size: int
    wall_s: float
    command: list[str]
    log_tail: str = ""
    #: The result of the rank whose failure ended the job (the earliest, `_first_failure`), where it wrote one.
    cause: RankResult | None = None
    #: What the launcher did to a job that ended ok otherwise than by itself (stopped after every rank wrote ok).
    note: str | None = None

    def launcher_record(self) -> LauncherRecord:
        """What is stored of the launcher with a case that ended ok: the command, its wall time, the note."""
        return {"command": self.command, "wall_s": self.wall_s, "note": self.note}

    def rank_records(self) -> list[RankRecord]:
        """Each rank's identity and memory, stored with the case (rank order)."""
        return [RankRecord(rank=r.get("rank"), host=r.get("host"), pid=r.get("pid"), device=r.get("device"),
                           peak_rss_bytes=r.get("peak_rss_bytes"), peak_device_mem_bytes=r.get("peak_device_mem_bytes"))
                for r in self.ranks]

    def footprint(self, where: str) -> Footprint:
        """The case's top-level memory figures from its ranks (`where`: the stored key of their records, e.g.
        metrics['ddp']['ranks']): the largest peak RSS and the largest device allocator peak over the ranks, with
        their sources; None with the reason where no rank measured one (CPU ranks: no allocator statistics)."""
        rss = [v for r in self.ranks if (v := r.get("peak_rss_bytes")) is not None]
        dev = [v for r in self.ranks if (v := r.get("peak_device_mem_bytes")) is not None]
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


def classify(ended: str, returncode: int | None, ranks: list[RankResult], vanished: dict[int, float],
             world_size: int, timeout_s: float, oom_before: int | None, log_tail: str,
             stopped_at: float | None = None) -> tuple[CaseStatus, str | None]:
    """The job's status from its first observed failure: a rank's own failure (its result file) or a rank seen
    gone without a result (`vanished`), whichever came first; a peer that fails after it (a connection reset
    by the dead rank) is not the cause, nor is a rank stopped by torchrun after another failed (`STOPPED`).
    A job stopped at its time-out (`stopped_at`) is `timeout` unless a rank failed before the stop: a rank that
    fails at or after it (a peer's connection reset by the stop) is the stop's doing, not the job's."""
    failure = first_failure(ranks, vanished, stopped_at if ended == "timeout" else None)
    if failure is not None:
        rank, first = failure
        if first is not None:
            # a failure a rank wrote: oom, unsupported or error (`rank.failure_status`), never ok or stopped
            return cast(CaseStatus, first.get("status", "error")), f"rank {rank}: {first.get('reason')}"
        if oom_rose(oom_before):
            return "oom", f"rank {rank} was killed by the kernel OOM killer (cgroup oom_kill count rose)"
        where = f" (torchrun: {log_tail})" if log_tail else ""
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
    if oom_rose(oom_before):
        return "oom", f"rank(s) {missing} killed by the kernel OOM killer (cgroup oom_kill count rose)"
    where = f" (torchrun: {log_tail})" if log_tail else ""
    return "crashed", f"rank(s) {missing} ended without a result; torchrun exited {returncode}{where}"


def first_failure(ranks: list[RankResult], vanished: dict[int, float],
                  before: float | None = None) -> tuple[int | None, RankResult | None] | None:
    """(rank, its result or None where it vanished without one) of the earliest failure observed, None if none:
    a rank's own failure (its result's `finished_at`) or a rank seen gone (`vanished`, less the poll's slack);
    with `before` (wall time), only those that happened before it."""
    events: list[tuple[float, int | None, RankResult | None]] = [
        (r.get("finished_at", 0.0), r.get("rank"), r) for r in ranks if r.get("status") not in ("ok", STOPPED)]
    events += [(t - VANISH_SLACK_S, rank, None) for rank, t in vanished.items()]
    if before is not None:
        events = [e for e in events if e[0] < before]
    if not events:
        return None
    _, rank, first = min(events, key=lambda e: (e[0], e[1] if e[1] is not None else -1))
    return rank, first


def oom_rose(before: int | None) -> bool:
    after = oom_kills()
    return before is not None and after is not None and after > before


def oom_kills() -> int | None:
    from dlperf.meters.oom import oom_kill_count

    return oom_kill_count()


def tail(path: Path, lines: int = 4) -> str:
    """torchrun's last meaningful lines, one line (its banner and warnings left out)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    keep = [t.strip() for t in text if t.strip() and "*****" not in t and "OMP_NUM_THREADS" not in t]
    return " | ".join(keep[-lines:])


def stopped_note(ranks: list[RankResult], stopped_at: float | None) -> str | None:
    """Why a job that ended ok was stopped by the launcher (every rank wrote ok, torchrun did not exit), or None
    where it exited by itself (`stopped_at` None)."""
    if stopped_at is None:
        return None
    waited = stopped_at - max((r.get("finished_at", stopped_at) for r in ranks), default=stopped_at)
    return (f"every rank wrote ok, but torchrun had not exited {waited:.1f} s after the last one did (a hang in "
            f"the job's teardown, e.g. destroy_process_group): the launcher stopped it")
