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
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

OVERLAP_NOTE = ("DDP overlaps communication with the backward pass (each gradient bucket is all-reduced as soon "
                "as it is ready): comm_s_per_step is the time the communication ops took, not the time the step "
                "waited for them")


def counted(event: Any, backend: str, cuda_type: Any) -> bool:
    """Whether one profiler event is a communication operation counted for `backend` (see the module's text)."""
    name = event.name
    if backend == "nccl":
        return event.device_type == cuda_type and name.lower().startswith("nccl")
    return name.startswith("gloo:")


def summarize(events: Any, steps: int, backend: str, cuda_type: Any = None) -> dict[str, Any]:
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


def profile_comm(torch: Any, timed_step: Callable[[], float], steps: int, backend: str, world_size: int,
                 cuda: bool) -> dict[str, Any]:
    """Run `steps` steps under torch.profiler (CPU activity, plus CUDA on a GPU) and return the stored `comm`
    record: comm_s_per_step, step_s_profiled (median step with the profiler on), comm_fraction, events, note."""
    out: dict[str, Any] = {"source": "torch.profiler", "profiled_steps": steps, "comm_s_per_step": None,
                           "step_s_profiled": None, "comm_fraction": None, "events": {}, "note": None}
    if steps <= 0:
        out["note"] = "not profiled: profile_steps is 0"
        return out
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        times = [timed_step() for _ in range(steps)]
    events = summarize(prof.events(), steps, backend, DeviceType.CUDA)
    step_s = statistics.median(times)
    out |= {"step_s_profiled": step_s, "events": events}
    if events:
        comm = sum(events.values())
        one = ("world size 1: DDP still calls the backend's all-reduce, over one process (no peer, nothing is "
               "sent); this is that call's own cost. " if world_size == 1 else "")
        wait = ("; a gloo op's time runs from its start to its end on gloo's thread, so it includes the wait for "
                "the slowest peer to reach it" if backend == "gloo" and world_size > 1 else "")
        out |= {"comm_s_per_step": comm, "comm_fraction": comm / step_s, "note": one + OVERLAP_NOTE + wait}
    elif world_size == 1:
        out["comm_s_per_step"] = 0.0
        out["comm_fraction"] = 0.0
        out["note"] = ("world size 1: the profiler recorded no communication op (DDP with one process has no peer "
                       "to all-reduce with)")
    else:
        out["note"] = (f"the profiler recorded no {backend} communication op over {steps} steps of {world_size} "
                       f"ranks: not measured")
    return out
