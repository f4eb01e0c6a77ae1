"""The run's default CPU thread count, chosen so as not to make contention worse, and the idle wait record.

With more threads than free cores, an OpenMP op waits at every barrier for a descheduled sibling: on
the 2-core machine a 195 us sigmoid took ~8 ms while another process kept both cores busy, and ~400 us
with one thread. So, unless a study or `--threads` sets it, a run uses the physical cores that other
processes leave idle when it starts (at least one), and says so. An unfinished run of the same study
keeps the thread count it started with, so resuming it on a busier (or quieter) machine does not mix
two configurations.
"""

from __future__ import annotations

import math
from typing import Any

from dlperf.core.result import CaseResult
from dlperf.core.validity import OTHERS_OVERSUBSCRIBED_CORES, assess
from dlperf.hardware.probe import default_threads
from dlperf.meters.activity import busy_cores_now
from dlperf.store import Store
from dlperf.studies import Study
from dlperf.timing.measurement import Measurement

#: Seconds over which other processes' CPU use is read before a run picks its thread count.
BUSY_PROBE_S = 0.5


def idle_threads(cores: int, busy_cores: float | None) -> int:
    """The cores left to a run when other processes keep `busy_cores` busy, at least one.

    The same line as validity's: others at `OTHERS_OVERSUBSCRIBED_CORES` or more, with more threads than
    the cores they leave, make a case `contended`; so a core is given up as soon as others would tip it.
    """
    if busy_cores is None:
        return cores
    taken = max(0, math.ceil(busy_cores - OTHERS_OVERSUBSCRIBED_CORES))
    return max(1, min(cores, cores - taken))


def choose_threads(store: Store, study: Study, filters: dict[str, Any], *, resume: str | None,
                   new: bool) -> tuple[int, str]:
    """(threads, why) for a run that did not set its threads."""
    ref = resume
    if ref is None and not new:
        ref = store.find_resumable(study=study.name, variant=study.variant, study_hash=study.study_hash,
                                   filters=filters, env_id=None)
    if ref is not None:
        try:
            stored = store.run(store.resolve_run(ref))["settings"].get("threads")
        except Exception:  # an unknown --resume reference is reported where the run is resolved
            stored = None
        if stored:
            return int(stored), f"as the unfinished run {ref} started with"
    cores = default_threads()
    busy = busy_cores_now(BUSY_PROBE_S)
    threads = idle_threads(cores, busy)
    if busy is None:
        return threads, f"the {cores} physical cores (other processes' CPU use is not readable here)"
    if threads == cores:
        return threads, f"the {cores} physical cores (other processes used {busy:.1f} cores at the start)"
    return threads, (f"{threads} of {cores} physical cores: other processes used {busy:.1f} cores at the start, and "
                     f"more threads than free cores wait on each other (set --threads to choose)")


def with_wait(row: CaseResult, waited: dict[str, Any]) -> CaseResult:
    """The row with the idle wait before it recorded in its activity, and its validity judged again."""
    if row.metrics is None or row.metrics.activity is None:
        return row
    activity = dict(row.metrics.activity) | {"wait": waited}
    update: dict[str, Any] = {"activity": activity}
    if row.measurement is not None:
        update["validity"], update["validity_reason"] = assess(
            Measurement.from_dict(row.measurement), activity, threads=row.metrics.threads, device=row.device)
    return row.model_copy(update={"metrics": row.metrics.model_copy(update=update)})
