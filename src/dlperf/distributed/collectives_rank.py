"""One rank of a `collectives` job: time one collective of S bytes in blocks, then check its output.

Buffers (S as nccl-tests counts it, doc/PERFORMANCE.md): all-reduce and broadcast one buffer of S bytes;
all-gather an input of S/n and an output of S; reduce-scatter an input of S and an output of S/n. The calls are
torch.distributed's `all_reduce`, `all_gather_single` (formerly `all_gather_into_tensor`), `reduce_scatter_single`
(formerly `reduce_scatter_tensor`) and `broadcast` from rank 0; the timed buffers hold zeros (sums stay 0: no
overflow, no denormals however many calls).

Timing: the first call alone (`first_call_s`: connection set-up, NCCL's communicator), then the warm-up calls
(at least one), from which rank 0 plans the blocks (`plan`): `iters` back-to-back calls per sample and a number
of samples, both fixed before timing and broadcast from rank 0, so that every rank runs exactly the same number
of collectives (ranks that disagree deadlock). A sample: barrier, (device sync), t0, `iters` calls, device sync,
t1. Every rank's block times are gathered to rank 0; a sample's time is the slowest rank's (the operation is done
when the last rank is done). Python's garbage collector is off during the timed blocks (`rank.gc_paused`), as
under the house's timer. Then the check: inputs filled with known values (rank r holds r+1), and every rank
compares its output with what the collective must give; `checked` is true only where every rank's output was
right.
"""

from __future__ import annotations

import math
import time
from typing import Any

from dlperf.distributed.records import CollectiveRankFigures

#: Warm-up calls at least (each timed alone; the fastest plans the calibration block), whatever `warmup` says.
CALIBRATION_CALLS = 3
#: Samples per case where the budget allows (at least 6 give the median a 95% interval).
TARGET_SAMPLES = 20
#: Samples per case however long a call is: fewer cannot give a median worth storing (`core.validity`).
MIN_SAMPLES = 3
#: A block lasts at least this long, so the clock reads and the ranks' barrier exits stay a small part of it.
MIN_BLOCK_S = 0.01
#: ... and the timer's own cost (clock reads, device sync) stays under this fraction of a block.
MAX_OVERHEAD_FRACTION = 1e-3


def plan(call_s: float, *, steps: int | None, budget_s: float, min_run_time_s: float,
         overhead_s: float = 0.0) -> tuple[int, int, str]:
    """(iters per sample, samples, stop reason) from the per-call time seen in the warm-up, as the house's timer
    reads a case's settings: `steps` means exactly that many single-call samples; else blocks of at least
    `MIN_BLOCK_S` (and `min_run_time_s / TARGET_SAMPLES`, and 1000x the timer's overhead), `TARGET_SAMPLES` of them
    where `budget_s` holds them, fewer (at least `MIN_SAMPLES`) where it does not ("budget")."""
    if steps:
        return 1, steps, "steps"
    block_s = max(MIN_BLOCK_S, min_run_time_s / TARGET_SAMPLES, overhead_s / MAX_OVERHEAD_FRACTION)
    call_s = max(call_s, 1e-9)
    iters = max(1, math.ceil(block_s / call_s))
    fits = int(budget_s // (iters * call_s))
    if fits >= TARGET_SAMPLES:
        return iters, TARGET_SAMPLES, "samples"
    return iters, max(MIN_SAMPLES, fits), "budget"


def _dist_fn(dist: Any, new: str, old: str) -> Any:
    """torch.distributed's function by its current name, or its former one on an older torch."""
    return getattr(dist, new, None) or getattr(dist, old)


def buffers(op: str, elements: int, world_size: int, dtype: Any, device: str) -> tuple[Any, Any]:
    """(input, output) of `op` on S = `elements`, zero-filled; in-place ops have one buffer (input is output)."""
    import torch

    if op in ("all_reduce", "broadcast"):
        buf = torch.zeros(elements, dtype=dtype, device=device)
        return buf, buf
    big = torch.zeros(elements, dtype=dtype, device=device)
    small = torch.zeros(elements // world_size, dtype=dtype, device=device)
    return (small, big) if op == "all_gather" else (big, small)


def collective(op: str, inp: Any, out: Any) -> Any:
    """A function making one call of `op` on these buffers."""
    import torch.distributed as dist

    if op == "all_reduce":
        return lambda: dist.all_reduce(out)
    if op == "broadcast":
        return lambda: dist.broadcast(out, src=0)
    if op == "all_gather":
        gather = _dist_fn(dist, "all_gather_single", "all_gather_into_tensor")
        return lambda: gather(out, inp)
    if op == "reduce_scatter":
        scatter = _dist_fn(dist, "reduce_scatter_single", "reduce_scatter_tensor")
        return lambda: scatter(out, inp)
    raise ValueError(f"unknown collective {op!r}")


def check(op: str, inp: Any, out: Any, call: Any, *, rank: int, world_size: int) -> str | None:
    """Fill the input with known values, run `op` once, and compare: None where the output is right, else why not.
    Rank r holds r+1 (reduce-scatter: chunk j of rank r holds (r+1)(j+1)), so all-reduce gives n(n+1)/2,
    all-gather chunk k holds k+1, reduce-scatter gives rank r (r+1) n(n+1)/2, broadcast rank 0's 1."""
    import torch

    n = world_size
    tri = n * (n + 1) / 2
    if op == "reduce_scatter":
        chunks = inp.view(n, -1)
        for j in range(n):
            chunks[j].fill_((rank + 1) * (j + 1))
    else:
        inp.fill_(rank + 1)
    call()
    if op == "all_reduce":
        expected = torch.full_like(out, tri)
    elif op == "broadcast":
        expected = torch.ones_like(out)
    elif op == "all_gather":
        expected = torch.arange(1, n + 1, dtype=out.dtype, device=out.device).repeat_interleave(out.numel() // n)
    else:
        expected = torch.full_like(out, (rank + 1) * tri)
    rtol = 1e-6 if out.dtype == torch.float32 else 1e-2  # small integers: exact up to 8 ranks
    bad = ~torch.isclose(out, expected, rtol=rtol, atol=0.0)
    if not bool(bad.any()):
        return None
    i = int(bad.nonzero()[0])
    return (f"rank {rank}: {int(bad.sum())} of {out.numel()} elements wrong, first at {i}: {float(out[i])!r} "
            f"(expected {float(expected[i])!r})")


def _agree(value: int, device: str) -> int:
    """Rank 0's `value` on every rank (a broadcast): every rank then runs the same number of collectives."""
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.broadcast(t, src=0)
    return int(t.item())


def run(spec: Any, *, rank: int, world_size: int, device: str) -> CollectiveRankFigures:
    """Time and check the payload's collective on this rank; rank 0 returns every rank's figures gathered."""
    import torch
    import torch.distributed as dist

    from dlperf.timing.timer import estimate_overhead_s

    p = spec.payload
    op, size_bytes = p["op"], int(p["size_bytes"])
    dtype = getattr(torch, p["dtype"])
    elements = size_bytes // torch.empty(0, dtype=dtype).element_size()
    inp, out = buffers(op, elements, world_size, dtype, device)
    call = collective(op, inp, out)
    on_gpu = device.startswith("cuda")

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize(device)

    clock = time.perf_counter
    dist.barrier()
    sync()
    t = clock()
    call()
    sync()
    first_call_s = clock() - t
    warmup = max(CALIBRATION_CALLS, int(p.get("warmup", 2)))
    singles = []
    for _ in range(warmup):
        t = clock()
        call()
        sync()
        singles.append(clock() - t)
    overhead_s = estimate_overhead_s(clock, sync)
    settings = {"steps": p.get("steps"), "budget_s": float(p["budget_s"]),
                "min_run_time_s": float(p["min_run_time_s"]), "overhead_s": overhead_s}
    # Calibration: a block planned from the fastest single call, timed back to back, plans the samples.
    trial = _agree(plan(min(singles), **settings)[0], device)
    t = clock()
    for _ in range(trial):
        call()
    sync()
    trial_s = clock() - t
    # The faster of the two estimates: a block planned from it lasts at least its target unless calls slow down.
    iters, samples, stop_reason = plan(min(trial_s / trial, min(singles)), **settings)
    iters, samples = _agree(iters, device), _agree(samples, device)
    warmup_iters, warmup_s = warmup + trial, math.fsum(singles) + trial_s

    times_s: list[float] = []
    cpu_s: list[float] = []
    from dlperf.distributed.rank import gc_paused

    with gc_paused():  # no collection inside a timed block (as the house's timer)
        for _ in range(samples):
            dist.barrier()
            sync()
            c = time.process_time()
            t = clock()
            for _ in range(iters):
                call()
            sync()
            times_s.append(clock() - t)
            cpu_s.append(time.process_time() - c)

    problem = check(op, inp, out, call, rank=rank, world_size=world_size)
    mine = {"rank": rank, "times_s": times_s, "cpu_s": cpu_s, "problem": problem, "first_call_s": first_call_s,
            "warmup_s": warmup_s}
    every: list[Any] = [None] * world_size
    dist.all_gather_object(every, mine)
    if rank != 0:
        return {"device": device, "checked": problem is None, "problem": problem}
    problems = [e["problem"] for e in every if e["problem"]]
    return {
        "device": device, "op": op, "size_bytes": size_bytes, "dtype": p["dtype"], "iters": iters, "samples": samples,
        "stop_reason": stop_reason,
        "sample_times_s": [max(e["times_s"][i] for e in every) for i in range(samples)],  # the slowest rank's
        "sample_cpu_s": [math.fsum(e["cpu_s"][i] for e in every) for i in range(samples)],  # all ranks' CPU
        "rank_sample_times_s": [e["times_s"] for e in every],
        "first_call_s": max(e["first_call_s"] for e in every),
        "warmup_iters": warmup_iters, "warmup_s": max(e["warmup_s"] for e in every),
        "timer_overhead_s": overhead_s,
        "checked": not problems, "problems": problems,
    }
