"""The JSON shapes of a torchrun job, as TypedDicts (plain dicts at run time: what is written and stored is
unchanged): what each rank reads (its kind's payload), what each rank writes (`rank<R>.json`), and the job's
records stored with its case (`metrics["ddp"]["comm"]`, `["ranks"]`, `["launcher"]`, the memory footprint).
`core.payloads` reads the stored ones back; these say what `dlperf.distributed` writes.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class DdpPayload(TypedDict):
    """What every rank of a ddp job reads (`ddp.rank_payload`)."""

    workload: str
    model: str
    #: The inner workload's own parameters, every default resolved (its params model as JSON; its shape is that
    #: workload's: the CNN's or the transformer's).
    train: dict[str, Any]
    batch_per_rank: int
    bucket_cap_mb: float
    warmup: int
    steps: int | None
    budget_s: float
    min_run_time_s: float
    profile_steps: int
    seed: int
    #: TEST ONLY: "equivalence" runs `ddp_rank._check_equivalence` instead of the timed steps.
    check: NotRequired[str]


class CollectivePayload(TypedDict):
    """What every rank of a collectives job reads (`collectives.payload`)."""

    op: str
    size_bytes: int
    dtype: str
    warmup: int
    steps: int | None
    budget_s: float
    min_run_time_s: float


class RankComm(TypedDict):
    """One ddp rank's communication under torch's profiler (`ddp_profile.profile_comm`), seconds."""

    source: str
    profiled_steps: int
    comm_s_per_step: float | None
    step_s_profiled: float | None
    comm_fraction: float | None
    #: Seconds per step of each counted operation, by the profiler's event name.
    events: dict[str, float]
    note: str | None
    #: Each profiled step's end on perf_counter's clock.
    step_end_s: list[float]


class PerRankComm(TypedDict):
    """One rank's own figures kept in the job's `comm["per_rank"]` (None: the rank's record lacked it)."""

    rank: int
    comm_s_per_step: float | None
    step_s_profiled: float | None
    comm_fraction: float | None
    events: dict[str, float] | None


class JobComm(TypedDict):
    """The job's stored `comm` record (`ddp_profile.combine`; read back as `core.payloads.DdpComm`)."""

    source: str
    profiled_steps: int
    comm_s_per_step: float | None
    comm_s_per_step_max: float | None
    comm_rank: int | None
    step_s_profiled: float | None
    comm_fraction: float | None
    events: dict[str, float]
    note: str | None
    per_rank: list[PerRankComm]


class DdpRankFigures(TypedDict):
    """What one ddp rank's `run` returns from its timed and profiled steps (seconds; ends on perf_counter)."""

    device: NotRequired[str]  # always written; NotRequired as in `RankResult`, which a failed rank's lacks
    first_call_s: float
    warmup_step_s: list[float]
    steps_timed: int
    stop_reason: str
    step_s: list[float]
    cpu_s: list[float]
    loop_start_s: float
    step_end_s: list[float]
    comm: RankComm


class EquivalenceCheck(TypedDict):
    """TEST ONLY: a ddp rank's equivalence check against one process on the whole batch (`_check_equivalence`)."""

    steps: int
    global_batch: int
    params: int
    max_abs_diff: float
    max_abs_update: float
    max_abs_diff_own_shard: float


class EquivalenceFigures(TypedDict):
    """What a ddp rank's `run` returns under `check: equivalence`."""

    check: EquivalenceCheck


class CollectiveRankFigures(TypedDict, total=False):
    """What one collectives rank's `run` returns: every rank `device`, `checked` and `problem`; rank 0 instead
    every rank's figures gathered (its samples the slowest rank's, seconds) and every problem found."""

    device: str
    checked: bool
    problem: str | None
    op: str
    size_bytes: int
    dtype: str
    iters: int
    samples: int
    stop_reason: str
    sample_times_s: list[float]
    sample_cpu_s: list[float]
    rank_sample_times_s: list[list[float]]
    first_call_s: float
    warmup_iters: int
    warmup_s: float
    timer_overhead_s: float
    problems: list[str]


class RankResult(TypedDict, total=False):
    """A rank's result file (`rank.py`): its status and reason (a failure's traceback), who and where it ran, its
    memory peaks (bytes; None: not measured) and when it finished (epoch s), with what its kind's `run` returned
    where it ended ok."""

    status: str
    reason: str | None
    traceback: str
    rank: int
    pid: int
    host: str
    peak_rss_bytes: int | None
    peak_device_mem_bytes: int | None
    finished_at: float
    device: str


class DdpRankResult(RankResult, DdpRankFigures, total=False):
    """A ddp rank's result file."""


class CollectiveRankResult(RankResult, CollectiveRankFigures, total=False):
    """A collectives rank's result file."""


class RankRecord(TypedDict):
    """What is stored of each rank of a job that ended ok (None: the rank's result lacked it)."""

    rank: int | None
    host: str | None
    pid: int | None
    device: str | None
    peak_rss_bytes: int | None
    peak_device_mem_bytes: int | None


class LauncherRecord(TypedDict):
    """What is stored of the launcher of a job that ended ok: torchrun's command, its wall time (s), its note."""

    command: list[str]
    wall_s: float
    note: str | None


class Footprint(TypedDict):
    """A job's top-level memory figures (bytes; None: no rank measured one) and where each comes from."""

    peak_rss_bytes: int | None
    peak_rss_source: str
    peak_device_mem_bytes: int | None
    peak_device_mem_source: str


class CollectiveRecord(TypedDict):
    """A collectives job's stored `metrics["collective"]` (`collectives.collective_metrics`; read back as
    `core.payloads.CollectiveMetrics`): S in bytes, bandwidths in bytes/s from the median at store time."""

    op: str
    size_bytes: int
    world_size: int
    backend: str
    dtype: str
    bus_factor: float
    iters_per_sample: int
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    checked: bool
    ranks: list[RankRecord]
    launcher: LauncherRecord


#: What every rank of a `faults` job reads: what rank R does by `rank_<R>`, else by `all` (`fault_rank`).
FaultPayload = dict[str, str]
#: Any job kind's payload (`launch.launch`).
RankPayload = DdpPayload | CollectivePayload | FaultPayload
