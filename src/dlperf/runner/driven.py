"""A case whose workload measures itself (`Workload.drive`), as the worker runs it.

Two kinds: serving under LoadGen returns only its own metrics (no timer samples), and dlperf's validity then
comes from the machine's activity alone (`core.validity.assess_activity`, with the threads the case kept busy);
a torchrun job (`dlperf.distributed`: data-parallel training, collectives) returns its timed samples too, under
the key `measurement` (a `timing.Measurement`), which are stored as the case's measurement, derived like any
timed case's (`runner.derive`) and judged by `core.validity.assess`. The machine's activity counts the CPU of
the case's child processes (the job's ranks) as the case's own. The worker's energy and profile settings have
no per-call timing of the worker's own to work on: the case says so instead of dropping them silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from dlperf.core.settings import RunSettings
    from dlperf.frameworks import Framework
    from dlperf.timing.measurement import MeasurementRecord
    from dlperf.workloads.base import Step, Workload, WorkloadParams

#: Seconds of machine activity recorded just before and just after the case (the worker idle).
ACTIVITY_WINDOW_S = 0.1
#: Why a driven case has no energy reading.
NO_ENERGY = ("not measured for a case driven by its workload (LoadGen, a torchrun job): energy is metered over "
             "the worker's own timed calls, which a driven case has none of")
#: Why a case run in its own processes has no device memory figure of the worker's.
RANKS_MEMORY = "measured in the case's own processes (each rank's record), not by the worker"
NO_PROFILE = ("no profile for a case driven by its workload (LoadGen, a torchrun job): the profiler runs the "
              "timer's step alone")


class Footprint(TypedDict, total=False):
    """Memory, threads and device of a case as the worker saw them at its end (`runner.worker._footprint`): for a
    case run in its own processes, their memory figures with their sources (`processes_footprint`) instead."""

    baseline_rss_bytes: int
    threads: int | None
    device: str
    peak_rss_bytes: int | None
    peak_device_mem_bytes: int | None
    peak_device_mem_source: str | None
    #: a case run in its own processes only: where its RSS figure comes from, and the waiting worker's own peak
    peak_rss_source: str
    worker_peak_rss_bytes: int


def processes_footprint(metrics: dict[str, Any], worker_rss_bytes: int) -> Footprint:
    """The memory figures of a case run in its own processes (`Workload.runs_in_own_processes`), for the
    worker's `_footprint`: the drive's own (the ranks' largest peak RSS and device allocator peak, with their
    sources), None with the reason where it gave none, and the worker's own peak RSS as `worker_peak_rss_bytes`
    (the worker only waited). The worker's allocator is never read: it never ran the case on the device."""
    return {"worker_peak_rss_bytes": worker_rss_bytes,
            "peak_rss_bytes": metrics.get("peak_rss_bytes"),
            "peak_rss_source": metrics.get("peak_rss_source") or RANKS_MEMORY,
            "peak_device_mem_bytes": metrics.get("peak_device_mem_bytes"),
            "peak_device_mem_source": metrics.get("peak_device_mem_source") or RANKS_MEMORY}


def is_driven(workload: Any) -> bool:
    """Whether the workload measures itself (it overrides `Workload.drive`): decided before anything runs."""
    from dlperf.workloads.base import Workload

    return type(workload).drive is not Workload.drive


def run_driven(fw: Framework, device: str, workload: Workload[Any], params: WorkloadParams, built: Step,
               settings: RunSettings) -> tuple[dict[str, Any], MeasurementRecord | None]:
    """(metrics, measurement as stored or None) from `workload.drive`, called once, with the machine's activity
    around it. A drive that returns `metrics["measurement"]` (a `timing.Measurement`) is a timed case: its
    statistics and rates are derived from those samples with the workload's cost, and its validity judged on
    them; `metrics["busy_threads"]` (optional) is how many threads it kept busy across its processes."""
    from dlperf.core.validity import assess, assess_activity
    from dlperf.meters.activity import Monitor
    from dlperf.runner.derive import derive_metrics

    if not workload.runs_in_own_processes:  # a torchrun case: the worker must not create a CUDA context
        fw.reset_peak_memory(device)
    monitor = Monitor(with_children=True)
    monitor.idle_window("before", ACTIVITY_WINDOW_S)
    monitor.start("during", top=True)
    try:
        metrics = workload.drive(fw, device, params, built, settings)
    finally:
        monitor.stop("during")  # closed on an error too
    if metrics is None:
        raise RuntimeError(f"workload {workload.name!r} overrides drive but returned no metrics")
    monitor.idle_window("after", ACTIVITY_WINDOW_S)
    m = metrics.pop("measurement", None)
    busy = metrics.get("busy_threads") or fw.threads()
    if m is not None:
        metrics = derive_metrics(m, workload.built_cost(params, built)) | metrics  # the drive's own figures win
    activity = metrics["activity"] = monitor.record()
    if m is not None:
        metrics["validity"], metrics["validity_reason"] = assess(m, activity, threads=busy, device=device)
    else:
        metrics["validity"], metrics["validity_reason"] = assess_activity(activity, threads=busy, device=device)
    if settings.energy:
        metrics["energy"] = {"measured": False, "reason": NO_ENERGY}
    else:
        metrics["energy"] = {"measured": False,
                             "reason": "energy measurement switched off for this study (energy: false)"}
    if settings.profile:
        metrics["profile_note"] = NO_PROFILE
    return metrics, None if m is None else m.to_dict()
