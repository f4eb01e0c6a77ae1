"""The time a DDP step spends in communication, from torch.profiler over a few extra steps of one rank.

What is counted, each operation once:
- gloo (CPUs): the events named `gloo:<op>` (e.g. `gloo:all_reduce`). Gloo runs each collective on its own worker
  thread and the profiler records the whole operation there, from its start to its end, including the wait for
  the peers to reach it. The `c10d::allreduce_` event on the training thread is the dispatcher's call that
  enqueues that same operation (it overlaps the gloo event on another thread): counting both would count the
  operation twice, so it is left out.
- NCCL (GPUs): the GPU kernels named `nccl*` (e.g. `ncclDevKernel_AllReduce_Sum_f32_RING_LL`), their time on the
  device; the CPU-side `c10d::`/`nccl:` events only launch them.
An event nested inside another counted event is not counted again. DDP starts each bucket's all-reduce during the
backward pass, as soon as the bucket's gradients are ready, so the communication overlaps the computation: the
communication time is not the time the step waits for it, and comm_fraction is not the share a faster network
would save.

Every rank profiles its own steps (`profile_comm`); the driver keeps them all (`per_rank`) and takes the
smallest as the case's `comm_s_per_step` (`combine`): an operation's time on a rank runs from the moment that
rank reached it to the end, so it includes the wait for the last peer to reach it (gloo's thread blocks; NCCL's
kernels spin on the device until the peers' data arrive). The rank that reached the operations last waited
least: its time is the closest to the transfer itself. The largest (transfer plus waiting) is stored beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from dlperf.distributed.records import JobComm, PerRankComm, RankComm

OVERLAP_NOTE = ("DDP overlaps communication with the backward pass (each gradient bucket is all-reduced as soon "
                "as it is ready): comm_s_per_step is the time the communication ops took, not the time the step "
                "waited for them")


def counted(event: Any, backend: str, cuda_type: Any) -> bool:
    """Whether one profiler event is a communication operation counted for `backend` (see the module's text)."""
    name = event.name
    if backend == "nccl":
        return event.device_type == cuda_type and name.lower().startswith("nccl")
    return name.startswith("gloo:")


def summarize(events: Any, steps: int, backend: str, cuda_type: Any = None) -> dict[str, float]:
    """Seconds per step of the counted communication events, by name, and their sum (events: FunctionEvents)."""
    ids = {id(e) for e in events if counted(e, backend, cuda_type)}
    by_name: dict[str, float] = {}
    for e in events:
        if id(e) not in ids or _inside_counted(e, ids):
            continue
        by_name[e.name] = by_name.get(e.name, 0.0) + e.time_range.elapsed_us() * 1e-6
    return {name: s / steps for name, s in sorted(by_name.items())}


def _inside_counted(event: Any, ids: set[int]) -> bool:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if id(parent) in ids:
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False


def profile_comm(torch: Any, timed_step: Callable[[], tuple[float, float]], steps: int, backend: str,
                 world_size: int, cuda: bool) -> RankComm:
    """Run `steps` steps (`timed_step() -> (wall s, end on perf_counter)`) under torch.profiler (CPU activity,
    plus CUDA on a GPU) and return this rank's `comm` record: comm_s_per_step, step_s_profiled (its own median
    step with the profiler on), comm_fraction, events, note, and `step_end_s` (each profiled step's end, which
    `combine` sets against the other ranks')."""
    out: RankComm = {"source": "torch.profiler", "profiled_steps": steps, "comm_s_per_step": None,
                     "step_s_profiled": None, "comm_fraction": None, "events": {}, "note": None, "step_end_s": []}
    if steps <= 0:
        out["note"] = "not profiled: profile_steps is 0"
        return out
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        timed = [timed_step() for _ in range(steps)]
    events = summarize(prof.events(), steps, backend, DeviceType.CUDA)
    step_s = statistics.median(t[0] for t in timed)
    out |= {"step_s_profiled": step_s, "events": events, "step_end_s": [t[1] for t in timed]}
    if events:
        comm = sum(events.values())
        one = ("world size 1: DDP still calls the backend's all-reduce, over one process (no peer, nothing is "
               "sent); this is that call's own cost. " if world_size == 1 else "")
        out |= {"comm_s_per_step": comm, "comm_fraction": comm / step_s, "note": one + OVERLAP_NOTE}
    elif world_size == 1:
        out["comm_s_per_step"] = 0.0
        out["comm_fraction"] = 0.0
        out["note"] = ("world size 1: the profiler recorded no communication op (DDP with one process has no peer "
                       "to all-reduce with)")
    else:
        out["note"] = (f"the profiler recorded no {backend} communication op over {steps} steps of {world_size} "
                       f"ranks: not measured")
    return out


MIN_NOTE = ("comm_s_per_step is the smallest over the ranks (comm_rank names it; each rank's in per_rank): a rank's "
            "communication time includes its wait for the last peer to reach each operation ({how}), and the rank "
            "that waited least is the closest to the transfer itself; comm_s_per_step_max, the largest, is transfer "
            "plus waiting")
WAITS = {"gloo": "gloo's thread blocks until then", "nccl": "NCCL's kernels spin on the GPU until the peers' data "
                                                            "arrive"}


def job_profiled_step_s(ranks_comm: list[RankComm]) -> float | None:
    """The median step of the job with the profiler on, as the slowest rank finished it: step i ends when the
    last rank ends it, so it lasts from the last rank's end of step i-1 (the first profiled step, which starts
    the profiler, is left out; with one profiled step, the slowest rank's own median)."""
    ends = [c.get("step_end_s") or [] for c in ranks_comm]
    n = min((len(e) for e in ends), default=0)
    if n >= 2:
        last = [max(e[i] for e in ends) for i in range(n)]
        return statistics.median(b - a for a, b in zip(last, last[1:], strict=False))
    own = [s for c in ranks_comm if (s := c.get("step_s_profiled")) is not None]
    return max(own) if own else None


def combine(ranks_comm: list[RankComm], backend: str) -> JobComm:
    """The case's stored `comm` record from every rank's (rank order): comm_s_per_step the smallest over the
    ranks, its rank (`comm_rank`) and events, comm_s_per_step_max the largest, step_s_profiled the job's
    (`job_profiled_step_s`), comm_fraction their ratio, every rank's own figures in `per_rank`."""
    first = ranks_comm[0]
    per_rank = [PerRankComm(rank=r, comm_s_per_step=c.get("comm_s_per_step"),
                            step_s_profiled=c.get("step_s_profiled"), comm_fraction=c.get("comm_fraction"),
                            events=c.get("events")) for r, c in enumerate(ranks_comm)]
    measured = [(s, r) for r, c in enumerate(ranks_comm) if (s := c.get("comm_s_per_step")) is not None]
    step_s = job_profiled_step_s(ranks_comm)
    out: JobComm = {"source": first["source"], "profiled_steps": first["profiled_steps"],
                    "comm_s_per_step": None, "comm_s_per_step_max": None, "comm_rank": None,
                    "step_s_profiled": step_s, "comm_fraction": None, "events": {},
                    "note": first.get("note"), "per_rank": per_rank}
    if not measured:
        return out
    comm, rank = min(measured)
    out |= {"comm_s_per_step": comm, "comm_s_per_step_max": max(measured)[0], "comm_rank": rank,
            "events": ranks_comm[rank].get("events") or {}, "note": ranks_comm[rank].get("note")}
    if step_s:
        out["comm_fraction"] = comm / step_s
    if len(ranks_comm) > 1:
        out["note"] = "; ".join(x for x in (out["note"], MIN_NOTE.format(how=WAITS.get(backend, backend)))
                                if x)
    return out
