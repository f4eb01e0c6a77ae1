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

from typing import Any

#: Seconds of machine activity recorded just before and just after the case (the worker idle).
ACTIVITY_WINDOW_S = 0.1
#: Why a driven case has no energy reading.
NO_ENERGY = ("not measured for a case driven by its workload (LoadGen, a torchrun job): energy is metered over "
             "the worker's own timed calls, which a driven case has none of")
NO_PROFILE = ("no profile for a case driven by its workload (LoadGen, a torchrun job): the profiler runs the "
              "timer's step alone")


def is_driven(workload: Any) -> bool:
    """Whether the workload measures itself (it overrides `Workload.drive`): decided before anything runs."""
    from dlperf.workloads.base import Workload

    return type(workload).drive is not Workload.drive


def run_driven(fw: Any, device: str, workload: Any, params: Any, built: Any,
               settings: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(metrics, measurement as stored or None) from `workload.drive`, called once, with the machine's activity
    around it. A drive that returns `metrics["measurement"]` (a `timing.Measurement`) is a timed case: its
    statistics and rates are derived from those samples with the workload's cost, and its validity judged on
    them; `metrics["busy_threads"]` (optional) is how many threads it kept busy across its processes."""
    from dlperf.core.validity import assess, assess_activity
    from dlperf.meters.activity import Monitor
    from dlperf.runner.derive import derive_metrics

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
    metrics["activity"] = monitor.record()
    if m is not None:
        metrics["validity"], metrics["validity_reason"] = assess(m, metrics["activity"], threads=busy,
                                                                 device=device)
    else:
        metrics["validity"], metrics["validity_reason"] = assess_activity(metrics["activity"], threads=busy,
                                                                          device=device)
    if settings.energy:
        metrics["energy"] = {"measured": False, "reason": NO_ENERGY}
    else:
        metrics["energy"] = {"measured": False,
                             "reason": "energy measurement switched off for this study (energy: false)"}
    if settings.profile:
        metrics["profile_note"] = NO_PROFILE
    return metrics, None if m is None else m.to_dict()
