"""A stored case result and its metrics, typed; statistics recomputed from the raw samples on load.

`Metrics` declares every metric name dlperf itself writes, units in the names; a workload or a
tool may add others (profiles, counters, re-check notes), kept as extra fields. The statistics
(`Measurement.summary`) and the rates derived from them (`derive_rates`) are never trusted from disk:
`CaseResult.from_row` recomputes them from the stored measurement (raw samples and the iterations
behind each) and the per-call costs stored beside them, so `show`, `report` and `export` print
what the samples say.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from dlperf.core.payloads import CollectiveMetrics, DdpMetrics, LoadgenSummary, ServerSearch
from dlperf.core.status import CaseStatus
from dlperf.timing.measurement import Measurement, Summary


def case_key(workload: str, framework: str, device: str, params: Mapping[str, Any]) -> str:
    """A case's stable, readable identity (without its repetition), made from what defines the case: the
    runner stores each result under it, and a bundle's result must carry the key its own fields give."""
    kv = ",".join(f"{k}={params[k]}" for k in sorted(params))
    return f"{workload}/{framework}/{device}/{kv}"


class Rates(Summary):
    """A measurement's statistics (`Summary`) and, from the median, the rates the cost model implies: None where
    it does not define the quantity (`derive_rates`)."""

    samples_per_call: int | None
    time_per_sample_s: float | None
    samples_per_s: float | None
    flops_per_call: float | None
    flops_per_s: float | None
    bytes_per_call: float | None
    bytes_per_s: float | None
    arithmetic_intensity: float | None


def derive_rates(stats: Summary, samples: int | None, flops: float | None, nbytes: float | None) -> Rates:
    """Statistics plus, from the median, throughput, FLOP/s and bytes/s, in the order they are stored.

    A quantity the cost model does not define stays None; the spread of every rate is the
    measurement's IQR/median (`iqr_rel`).
    """
    median = stats["median_s"]
    return {
        **stats,
        "samples_per_call": samples,
        "time_per_sample_s": median / samples if samples else None,
        "samples_per_s": samples / median if samples is not None and median > 0 else None,
        "flops_per_call": flops,
        "flops_per_s": flops / median if flops is not None and median > 0 else None,
        "bytes_per_call": nbytes,
        "bytes_per_s": nbytes / median if nbytes is not None and median > 0 else None,
        "arithmetic_intensity": flops / nbytes if flops is not None and nbytes else None,
    }


class Metrics(BaseModel):
    """A case's metrics: the statistics, the rates, memory and energy; extra keys for workload-specific data."""

    model_config = ConfigDict(extra="allow")

    # statistics of per-call times (seconds), from the raw samples
    n_samples: int | None = None
    total_iters: int | None = None
    median_s: float | None = None
    mean_s: float | None = None
    stdev_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    iqr_s: float | None = None
    iqr_rel: float | None = None
    ci95_low_s: float | None = None
    ci95_high_s: float | None = None
    ci95_rel_width: float | None = None
    noisy: bool | None = None
    first_call_s: float | None = None
    block_size: int | None = None
    timer_overhead_s: float | None = None
    stop_reason: str | None = None
    # per-call timing (`measure(per_call=True)`): percentiles of single calls with their distribution-free 95%
    # intervals (None where n is too small for 95%, or where samples are blocks of calls); max/mean above
    per_call: bool | None = None
    p50_s: float | None = None
    p50_ci95_low_s: float | None = None
    p50_ci95_high_s: float | None = None
    p90_s: float | None = None
    p90_ci95_low_s: float | None = None
    p90_ci95_high_s: float | None = None
    p99_s: float | None = None
    p99_ci95_low_s: float | None = None
    p99_ci95_high_s: float | None = None
    # phases inside each call (`Step.call_phases`), raw: the first call's and the timed calls' (in per-call
    # mode one per sample); and generation's figures computed from them on load (`core.phases`)
    first_call_phases: dict[str, float] | None = None
    call_phases: list[dict[str, float]] | None = None
    call_phases_error: str | None = None
    ttft_p50_s: float | None = None
    ttft_p50_ci95_low_s: float | None = None
    ttft_p50_ci95_high_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p90_ci95_low_s: float | None = None
    ttft_p90_ci95_high_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_p99_ci95_low_s: float | None = None
    ttft_p99_ci95_high_s: float | None = None
    ttft_max_s: float | None = None
    ttft_mean_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p50_ci95_low_s: float | None = None
    tpot_p50_ci95_high_s: float | None = None
    tpot_p90_s: float | None = None
    tpot_p90_ci95_low_s: float | None = None
    tpot_p90_ci95_high_s: float | None = None
    tpot_p99_s: float | None = None
    tpot_p99_ci95_low_s: float | None = None
    tpot_p99_ci95_high_s: float | None = None
    tpot_max_s: float | None = None
    tpot_mean_s: float | None = None
    tpot_reason: str | None = None
    decode_tokens_per_s: float | None = None
    decode_tokens_per_s_ci95_low: float | None = None
    decode_tokens_per_s_ci95_high: float | None = None
    first_call_ttft_s: float | None = None
    first_call_tpot_s: float | None = None
    # trust: validity (core.status.Validity) and why; what the machine was doing (meters.activity);
    # the process's CPU seconds per wall second over the samples (median), from measurement.sample_cpu_s
    validity: str | None = None
    validity_reason: str | None = None
    activity: dict[str, Any] | None = None
    cpu_util: float | None = None
    # cost model per call and the rates from the median
    samples_per_call: int | None = None
    time_per_sample_s: float | None = None
    samples_per_s: float | None = None
    flops_per_call: float | None = None
    flops_per_s: float | None = None
    bytes_per_call: float | None = None
    bytes_per_s: float | None = None
    arithmetic_intensity: float | None = None
    # memory, threads, device as the worker saw them
    peak_rss_bytes: int | None = None
    baseline_rss_bytes: int | None = None
    peak_device_mem_bytes: int | None = None
    peak_device_mem_source: str | None = None
    threads: int | None = None
    device: str | None = None
    # energy: a meter's reading or its reason; an estimate only when asked for
    energy: dict[str, Any] | None = None
    energy_estimate: dict[str, Any] | None = None
    # workload hooks and tools
    steps_per_epoch: int | None = None
    time_per_epoch_s_derived: float | None = None
    profile: dict[str, Any] | None = None
    kernels: list[dict[str, Any]] | None = None
    kernels_error: str | None = None
    counters: dict[str, Any] | None = None
    # failures
    traceback: str | None = None
    skipped: bool | None = None
    #: a case not run: the value of its memory axis at which its series ran out of memory (`runner.sweep`)
    oom_at: dict[str, int] | None = None
    #: a failure under a memory cap re-checked in a fresh worker (`runner.recheck`): the raised cap (MiB), the
    #: check's status, reason, peak RSS (bytes) and wall time (s), and the note that settles it
    oom_recheck: dict[str, int | float | str | None] | None = None

    def get(self, name: str, default: Any = None) -> Any:
        """A metric by name, declared or extra, or `default` where the case has none."""
        value = getattr(self, name, None)
        if value is None and self.model_extra:
            value = self.model_extra.get(name)
        return default if value is None else value

    def loadgen_summary(self) -> LoadgenSummary | None:
        """A served case's LoadGen summary (`metrics["loadgen"]`) typed, read from the stored dict; None for a
        case that stored none."""
        return LoadgenSummary.read(self.get("loadgen"))

    def server_search_summary(self) -> ServerSearch | None:
        """A Server case's rate search (`metrics["server_search"]`) typed, read from the stored dict; None for a
        case that ran none."""
        return ServerSearch.read(self.get("server_search"))

    def ddp_summary(self) -> DdpMetrics | None:
        """A ddp case's job record (`metrics["ddp"]`) typed, read from the stored dict; None for a case that stored
        none (one that did not run)."""
        return DdpMetrics.read(self.get("ddp"))

    def collective_summary(self) -> CollectiveMetrics | None:
        """A collectives case's job record (`metrics["collective"]`) typed, read from the stored dict; None for a
        case that stored none (one that did not run)."""
        return CollectiveMetrics.read(self.get("collective"))

    def as_dict(self) -> dict[str, Any]:
        """The metrics that are set, as stored (for export)."""
        return self.model_dump(exclude_unset=True)


class CaseResult(BaseModel):
    """One stored case: what ran, how it ended, the raw measurement and the metrics."""

    model_config = ConfigDict(frozen=True)

    id: int | None = None
    run_id: str
    case_key: str
    repetition: int
    workload: str
    framework: str
    device: str
    params: dict[str, Any]
    status: CaseStatus
    reason: str | None = None
    measurement: dict[str, Any] | None = None
    metrics: Metrics | None = None
    env_id: int
    wall_s: float | None = None
    started_at: datetime
    finished_at: datetime

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def m(self) -> Metrics:
        """The metrics, empty where the case stored none."""
        return self.metrics or Metrics()

    def peak_memory(self) -> tuple[int | None, str]:
        """(bytes, what): the allocator's peak on a GPU, the worker's peak RSS on a CPU."""
        m = self.m
        if self.device != "cpu" and m.peak_device_mem_bytes:
            return int(m.peak_device_mem_bytes), "device allocator peak"
        return (int(m.peak_rss_bytes), "worker peak RSS") if m.peak_rss_bytes else (None, "not measured")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CaseResult:
        """A result from a store row, its statistics and rates recomputed from the raw samples."""
        data = dict(row)
        metrics = dict(data.get("metrics") or {})
        if data.get("measurement") and "median_s" in metrics:
            stats = Measurement.from_dict(data["measurement"]).summary()
            fresh = derive_rates(stats, metrics.get("samples_per_call"), metrics.get("flops_per_call"),
                                 metrics.get("bytes_per_call"))
            metrics.update({k: v for k, v in fresh.items() if k in metrics})
            if metrics.get("steps_per_epoch") is not None and "time_per_epoch_s_derived" in metrics:
                metrics["time_per_epoch_s_derived"] = stats["median_s"] * metrics["steps_per_epoch"]
            if "validity" in metrics:  # judged again from the raw samples and activity, never trusted from disk
                from dlperf.core.validity import assess

                metrics["validity"], metrics["validity_reason"] = assess(
                    Measurement.from_dict(data["measurement"]), metrics.get("activity"),
                    # a torchrun case kept its ranks' threads busy, not the worker's (runner/driven.py)
                    threads=metrics.get("busy_threads") or metrics.get("threads"), device=data["device"])
        if metrics.get("call_phases") is not None:  # generation's figures, from the raw phases
            from dlperf.core.phases import generation_metrics

            params = data.get("params") or {}
            metrics.update(generation_metrics(metrics.get("first_call_phases"), metrics["call_phases"],
                                              int(params.get("batch") or 1), params.get("new_tokens")))
        data["metrics"] = Metrics.model_validate(metrics) if data.get("metrics") is not None else None
        return cls.model_validate(data)

    def as_row(self) -> dict[str, Any]:
        """Back to the store's row shape (export writes it)."""
        row = self.model_dump(exclude={"metrics"})
        row["metrics"] = self.metrics.as_dict() if self.metrics is not None else None
        return row
