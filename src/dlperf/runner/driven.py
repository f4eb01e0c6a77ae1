"""A case whose workload measures itself (`Workload.drive`: serving under LoadGen), as the worker runs it.

No timer samples: the workload's own metrics, the machine's activity before, during and after it, and dlperf's
validity from that activity alone (`core.validity.assess_activity`, with the threads the case kept busy). The
worker's energy and profile settings have no per-call timing to work on here: the case says so instead of
dropping them silently.
"""

from __future__ import annotations

from typing import Any

#: Seconds of machine activity recorded just before and just after the case (the worker idle).
ACTIVITY_WINDOW_S = 0.1
#: Why a driven case has no energy reading.
NO_ENERGY = ("not measured for a case driven by its workload (LoadGen): energy is metered over the timer's "
             "per-call runs, which a driven case has none of")
NO_PROFILE = "no profile for a case driven by its workload (LoadGen): the profiler runs the timer's step alone"


def is_driven(workload: Any) -> bool:
    """Whether the workload measures itself (it overrides `Workload.drive`): decided before anything runs."""
    from dlperf.workloads.base import Workload

    return type(workload).drive is not Workload.drive


def run_driven(fw: Any, device: str, workload: Any, params: Any, built: Any, settings: Any) -> dict[str, Any]:
    """The case's metrics from `workload.drive`, called once, with the machine's activity around it."""
    from dlperf.core.validity import assess_activity
    from dlperf.meters.activity import Monitor

    fw.reset_peak_memory(device)
    monitor = Monitor()
    monitor.idle_window("before", ACTIVITY_WINDOW_S)
    monitor.start("during", top=True)
    try:
        metrics = workload.drive(fw, device, params, built, settings)
    finally:
        monitor.stop("during")  # closed on an error too
    if metrics is None:
        raise RuntimeError(f"workload {workload.name!r} overrides drive but returned no metrics")
    monitor.idle_window("after", ACTIVITY_WINDOW_S)
    metrics["activity"] = monitor.record()
    metrics["validity"], metrics["validity_reason"] = assess_activity(metrics["activity"], threads=fw.threads(),
                                                                      device=device)
    if settings.energy:
        metrics["energy"] = {"measured": False, "reason": NO_ENERGY}
    else:
        metrics["energy"] = {"measured": False,
                             "reason": "energy measurement switched off for this study (energy: false)"}
    if settings.profile:
        metrics["profile_note"] = NO_PROFILE
    return metrics
