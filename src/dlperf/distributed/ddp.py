"""The `ddp` workload's drive: one case = one torchrun job of `world_size` ranks (`ddp_rank`), its samples and
figures combined into what the worker stores.

A sample is one optimizer step (forward, backward with DDP's all-reduce, update); its time is the slowest rank's
for that step (a step of the job ends when its last rank's does). Every rank returns its own step times in its
result file and this driver, in the case's worker, takes the maximum per step (the launcher collects every
rank's result, so no collective is spent on it). sample_cpu_s is rank 0's process CPU time per step.
"""

from __future__ import annotations

import statistics
from typing import Any

from dlperf.distributed.launch import backend_for, launch, remaining_s


def rank_payload(params: Any, settings: Any) -> dict[str, Any]:
    """What each rank needs, as plain values: the model, the inner training step's parameters (every default
    resolved, `DdpParams.trained_params`), the rank's batch, DDP's bucket size, the run's timing settings."""
    return {"workload": params.workload, "model": params.model, "train": params.trained_params(),
            "batch_per_rank": params.batch_per_rank, "bucket_cap_mb": params.bucket_cap_mb,
            "warmup": settings.warmup, "steps": settings.steps, "budget_s": settings.budget_s,
            "min_run_time_s": settings.min_run_time_s, "profile_steps": params.profile_steps, "seed": settings.seed}


def drive(fw: Any, device: str, params: Any, step: Any, settings: Any) -> dict[str, Any]:
    """Run the job and return {"measurement", "ddp" (the stored format), "busy_threads"}; a job that did not end
    ok raises `CaseEnded` with its status (oom, timeout, crashed, error, unsupported) and reason."""
    outcome = launch("ddp", rank_payload(params, settings), world_size=params.world_size, device=device,
                     threads_per_rank=params.threads_per_rank, timeout_s=remaining_s(settings.timeout_s),
                     seed=settings.seed)
    outcome.raise_for_status()
    ranks = outcome.ranks
    m = measurement(ranks)
    record = {"world_size": params.world_size, "nodes": 1, "nproc_per_node": params.world_size,
              "backend": backend_for(device), "scaling": params.scaling, "global_batch": params.global_batch,
              "batch_per_rank": params.batch_per_rank, "threads_per_rank": params.threads_per_rank,
              "sample_unit": params.sample_unit, "warmup_steps": m.warmup_iters, "steps_timed": m.n_samples,
              "rank_step_s_median": [statistics.median(r["step_s"]) for r in ranks],
              "comm": ranks[0]["comm"],
              "ranks": [{k: r.get(k) for k in ("rank", "host", "pid", "device", "peak_rss_bytes")} for r in ranks],
              "launcher": {"command": outcome.command, "wall_s": outcome.wall_s}}
    return {"measurement": m, "ddp": record, "busy_threads": params.world_size * params.threads_per_rank}


def measurement(ranks: list[dict[str, Any]]) -> Any:
    """The case's Measurement from every rank's result: per step the slowest rank's time; the first step and the
    warm-up likewise; rank 0's CPU time per step."""
    from dlperf.timing import Measurement

    counts = {len(r["step_s"]) for r in ranks}
    if len(counts) != 1:
        raise RuntimeError(f"the ranks timed different numbers of steps: {sorted(counts)}")
    n = counts.pop()
    if n == 0:
        raise RuntimeError("the job timed no step")
    steps = tuple(max(r["step_s"][i] for r in ranks) for i in range(n))
    warm = [max(r["warmup_step_s"][i] for r in ranks) for i in range(len(ranks[0]["warmup_step_s"]))]
    return Measurement(sample_times_s=steps, sample_iters=(1,) * n,
                       first_call_s=max(r["first_call_s"] for r in ranks), warmup_iters=len(warm),
                       warmup_s=sum(warm), block_size=1, stop_reason=ranks[0]["stop_reason"],
                       sample_cpu_s=tuple(ranks[0]["cpu_s"]), timer="perf_counter (slowest rank per step)")
