"""The `collectives` workload's drive: one case is one torchrun job (`collectives_rank.py` on every rank).

What is stored: the measurement (samples of `iters` back-to-back operations, each the slowest rank's block time;
`sample_cpu_s` the CPU time of all ranks together in that block, so that CPU per wall second is set against the
job's `world_size x threads_per_rank` busy threads) and `metrics["collective"]` (op, S, ranks, backend, nccl-tests'
bus factor, algbw and busbw from the median, whether every rank's output was right), with the ranks' memory at
the top level (the largest rank's peak RSS and CUDA allocator peak, `JobOutcome.footprint`: the worker only
waits for the job). A job whose output was
wrong ends the case `error`: a bandwidth of a wrong result is no figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from dlperf.core.status import CaseEnded
from dlperf.distributed.bandwidth import bandwidths, bus_factor
from dlperf.distributed.records import CollectivePayload, CollectiveRankResult, CollectiveRecord

if TYPE_CHECKING:
    from dlperf.core.settings import RunSettings
    from dlperf.frameworks import Framework


def payload(params: Any, settings: Any) -> CollectivePayload:
    """What every rank reads: the collective and the case's timing settings (`collectives_rank.plan`)."""
    return {"op": params.op, "size_bytes": params.size_bytes, "dtype": params.dtype, "warmup": settings.warmup,
            "steps": settings.steps, "budget_s": settings.budget_s, "min_run_time_s": settings.min_run_time_s}


def measurement(r0: CollectiveRankResult) -> Any:
    """The case's `timing.Measurement` from rank 0's gathered result."""
    from dlperf.timing.measurement import Measurement

    times = tuple(float(t) for t in r0["sample_times_s"])
    return Measurement(sample_times_s=times, sample_iters=(int(r0["iters"]),) * len(times),
                       sample_cpu_s=tuple(float(c) for c in r0["sample_cpu_s"]) if r0.get("sample_cpu_s") else None,
                       first_call_s=r0.get("first_call_s"), warmup_iters=int(r0.get("warmup_iters") or 0),
                       warmup_s=float(r0.get("warmup_s") or 0.0), block_size=int(r0["iters"]),
                       timer_overhead_s=float(r0.get("timer_overhead_s") or 0.0),
                       stop_reason=str(r0.get("stop_reason") or ""), timer="perf_counter")


def collective_metrics(params: Any, backend: str, r0: CollectiveRankResult, median_s: float,
                       outcome: Any) -> CollectiveRecord:
    """metrics["collective"], in the stored format (algbw and busbw from the median at store time)."""
    algbw, busbw = bandwidths(params.op, params.size_bytes, params.world_size, median_s)
    return {"op": params.op, "size_bytes": params.size_bytes, "world_size": params.world_size, "backend": backend,
            "dtype": params.dtype, "bus_factor": bus_factor(params.op, params.world_size),
            "iters_per_sample": int(r0["iters"]), "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": busbw,
            "checked": bool(r0["checked"]),
            "ranks": outcome.rank_records(),
            "launcher": outcome.launcher_record()}


def drive(fw: Framework, device: str, params: Any, step: Any, settings: RunSettings) -> dict[str, Any]:
    """Run the case's torchrun job and return its measurement and `collective` metrics; CaseEnded where the job
    failed (its status) or its output was wrong (`error`)."""
    from dlperf.distributed.launch import backend_for, launch, remaining_s

    outcome = launch("collectives", payload(params, settings), world_size=params.world_size, device=device,
                     threads_per_rank=params.threads_per_rank, timeout_s=remaining_s(settings.timeout_s),
                     seed=settings.seed)
    outcome.raise_for_status()
    r0 = cast(CollectiveRankResult, outcome.ranks[0])  # a collectives rank's result
    if not r0.get("checked"):
        problems = r0.get("problems") or ["rank 0 reported no check"]
        raise CaseEnded("error", f"collective output wrong: {'; '.join(problems)}", outcome.describe())
    m = measurement(r0)
    return {"measurement": m,
            "collective": collective_metrics(params, backend_for(device), r0, m.median_s, outcome),
            "busy_threads": params.world_size * params.threads_per_rank,
            **outcome.footprint("metrics['collective']['ranks']")}
