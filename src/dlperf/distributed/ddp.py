"""The `ddp` workload's drive: one case = one torchrun job of `world_size` ranks (`ddp_rank`), its samples and
figures combined into what the worker stores.

A sample is one optimizer step (forward, backward with DDP's all-reduce, update) of the job, as the slowest rank
finished it: the job's step i ends when its last rank's step i ends, so step i lasts from the moment the last
rank ended step i-1 to the moment the last rank ended step i (step 0 from the barrier all ranks left just
before the timed loop). Every rank returns the end of each of its steps on perf_counter's clock (one clock for
every process of the node) in its result file, and this driver, in the case's worker, combines them (the
launcher collects every rank's result, so no collective is spent on it); the steps then add up to the job's
timed span exactly. Not the maximum of the ranks' own step durations: in lockstep a rank's step includes its wait
for the slowest peer in the previous step's all-reduce, and taking each step's slowest rank counts that wait
twice (+8.5% on the median of a 2-rank LeNet-5 job here). sample_cpu_s is the CPU of every rank per step (the
sum of the ranks' process CPU times over their step i), as the collectives store it.

Memory is the ranks' (the worker only waits for the job; `Workload.runs_in_own_processes`): peak_rss_bytes is
the largest rank's peak RSS, peak_device_mem_bytes the largest rank's CUDA allocator peak (None on CPUs), each
rank's in metrics["ddp"]["ranks"] (`JobOutcome.footprint`); baseline_rss_bytes stays the worker's footprint before
the workload (torch imported), about what a rank carries before it builds its model, so peak less baseline is
about one rank's training memory; the worker's own peak is worker_peak_rss_bytes.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, cast

from dlperf.distributed.ddp_profile import combine
from dlperf.distributed.launch import backend_for, launch, remaining_s
from dlperf.distributed.records import DdpPayload, DdpRankResult

if TYPE_CHECKING:
    from dlperf.core.settings import RunSettings
    from dlperf.frameworks import Framework


def rank_payload(params: Any, settings: Any) -> DdpPayload:
    """What each rank needs, as plain values: the model, the inner training step's parameters (every default
    resolved, `DdpParams.trained_params`), the rank's batch, DDP's bucket size, the run's timing settings."""
    return {"workload": params.workload, "model": params.model, "train": params.trained_params(),
            "batch_per_rank": params.batch_per_rank, "bucket_cap_mb": params.bucket_cap_mb,
            "warmup": settings.warmup, "steps": settings.steps, "budget_s": settings.budget_s,
            "min_run_time_s": settings.min_run_time_s, "profile_steps": params.profile_steps, "seed": settings.seed}


def drive(fw: Framework, device: str, params: Any, step: Any, settings: RunSettings) -> dict[str, Any]:
    """Run the job and return {"measurement", "ddp" (the stored format), "busy_threads", and the ranks' memory
    (`JobOutcome.footprint`)}; a job that did not end ok raises `CaseEnded` with its status (oom, timeout,
    crashed, error, unsupported) and reason."""
    outcome = launch("ddp", rank_payload(params, settings), world_size=params.world_size, device=device,
                     threads_per_rank=params.threads_per_rank, timeout_s=remaining_s(settings.timeout_s),
                     seed=settings.seed)
    outcome.raise_for_status()
    ranks = cast(list[DdpRankResult], outcome.ranks)  # every rank wrote ok: a ddp rank's figures
    m = measurement(ranks)
    record = {"world_size": params.world_size, "nodes": 1, "nproc_per_node": params.world_size,
              "backend": backend_for(device), "scaling": params.scaling, "global_batch": params.global_batch,
              "batch_per_rank": params.batch_per_rank, "threads_per_rank": params.threads_per_rank,
              "sample_unit": params.sample_unit, "warmup_steps": m.warmup_iters, "steps_timed": m.n_samples,
              "rank_step_s_median": [statistics.median(r["step_s"]) for r in ranks],
              "comm": combine([r["comm"] for r in ranks], backend_for(device)),
              "ranks": outcome.rank_records(),
              "launcher": outcome.launcher_record()}
    return {"measurement": m, "ddp": record, "busy_threads": params.world_size * params.threads_per_rank,
            **outcome.footprint("metrics['ddp']['ranks']")}


def job_steps(ranks: list[DdpRankResult]) -> tuple[float, ...]:
    """The job's step times from every rank's step ends (perf_counter): step i = the last rank's end of step i
    less the last rank's end of step i-1, step 0 from the last rank's `loop_start_s` (the barrier before the loop).
    They sum to the job's span from that barrier to the last rank's last end."""
    counts = {len(r["step_end_s"]) for r in ranks}
    if len(counts) != 1:
        raise RuntimeError(f"the ranks timed different numbers of steps: {sorted(counts)}")
    n = counts.pop()
    if n == 0:
        raise RuntimeError("the job timed no step")
    ends = [max(r["loop_start_s"] for r in ranks)] + [max(r["step_end_s"][i] for r in ranks) for i in range(n)]
    return tuple(b - a for a, b in zip(ends, ends[1:], strict=False))


def measurement(ranks: list[DdpRankResult]) -> Any:
    """The case's Measurement from every rank's result: per step the job's step as the slowest rank finished it
    (`job_steps`); the first step and the warm-up the slowest rank's (untimed context); per step the CPU time of
    every rank together (the job's CPU, which `core.validity.assess` sets against the case's `world_size x
    threads_per_rank` busy threads: rank 0's alone would shrink them to one rank's worth and hide an
    oversubscribed machine)."""
    from dlperf.timing import Measurement

    steps = job_steps(ranks)
    n = len(steps)
    cpu = tuple(sum(r["cpu_s"][i] for r in ranks) for i in range(n))
    warm = [max(r["warmup_step_s"][i] for r in ranks) for i in range(len(ranks[0]["warmup_step_s"]))]
    return Measurement(sample_times_s=steps, sample_iters=(1,) * n,
                       first_call_s=max(r["first_call_s"] for r in ranks), warmup_iters=len(warm),
                       warmup_s=sum(warm), block_size=1, stop_reason=ranks[0]["stop_reason"],
                       sample_cpu_s=cpu, timer="perf_counter (the job's step: the last rank's step ends)")
