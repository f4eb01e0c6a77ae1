"""The run's default CPU thread count, chosen so as not to make contention worse, and the idle wait record.

With more threads than free cores, an OpenMP op waits at every barrier for a descheduled sibling: on
the 2-core machine a 195 us sigmoid took ~8 ms while another process kept both cores busy, and ~400 us
with one thread. So, unless a study or `--threads` sets it, a run uses the physical cores that other
processes leave idle when it starts (at least one), and says so; where this process may use fewer cores than
the machine has (its CPU affinity, its cgroup's CPU quota: `hardware.cpu_limits`), it starts from those. An
unfinished run of the same study keeps the thread count it started with, so resuming it on a busier (or
quieter) machine does not mix two configurations.

How a run's count came about is stored with the run (`runs.derived[SOURCE_KEY]`, never hashed: it is not the
environment): asked for (`--threads`, a study's `threads:`) or chosen for it (from the load at its start; on a
fleet, by each worker). `compare` reads it (`stored_source`) to say why two runs' threads differ.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict, cast

from dlperf.core.result import CaseResult
from dlperf.core.validity import OTHERS_OVERSUBSCRIBED_CORES, Activity, assess
from dlperf.hardware.probe import default_threads, thread_budget
from dlperf.meters.activity import IdleWait, busy_cores_now
from dlperf.store import Store
from dlperf.store.rows import RunRow
from dlperf.studies import Study
from dlperf.timing.measurement import Measurement

#: Seconds over which other processes' CPU use is read before a run picks its thread count.
BUSY_PROBE_S = 0.5
#: The key of `runs.derived` that records how the run's threads came about (`source`).
SOURCE_KEY = "threads_source"
#: How a thread count came about: asked for, or chosen for the run (from the load where it started).
ASKED = ("--threads", "study")
CHOSEN = ("load", "fleet workers")


class ThreadsSource(TypedDict):
    """How a run's threads came about, as stored under `SOURCE_KEY`: `chosen` None where not recorded."""

    chosen: bool | None
    by: str
    why: str


def source(by: str, why: str) -> ThreadsSource:
    """What a run stores under `SOURCE_KEY`: `by` one of ASKED or CHOSEN, `chosen` whether dlperf chose the count."""
    if by not in ASKED + CHOSEN:
        raise ValueError(f"unknown threads source {by!r}")
    return {"chosen": by in CHOSEN, "by": by, "why": why}


def stored_source(run: RunRow) -> ThreadsSource:
    """How a stored run's (a `runs` row's) threads came about, as `source` gives it; for a run stored before
    this was recorded: --threads where its filters hold it, each worker's choice for a fleet run that set none,
    else `chosen` None ("not recorded": the study file's or the load's, which cannot be told apart now)."""
    rec = (run.derived or {}).get(SOURCE_KEY)
    if isinstance(rec, dict) and rec.get("by") in ASKED + CHOSEN:
        return source(str(rec["by"]), str(rec.get("why") or ""))
    filters = run.filters or {}
    settings = run.settings or {}
    if (filters.get("overrides") or {}).get("threads") is not None:
        return source("--threads", "given on the command line")
    if filters.get("executor") and settings.get("threads") is None:
        return source("fleet workers", FLEET_WHY)
    return {"chosen": None, "by": "not recorded", "why": "stored before dlperf recorded how a run's threads came "
            "about (a study's threads: or the cores other processes left idle)"}


#: Why a fleet run that sets no threads has none of its own: each worker chooses its count.
FLEET_WHY = ("each worker uses the physical cores other processes leave idle there when it starts its first case "
             "of the run")


def describe(threads: Any, rec: Mapping[str, Any]) -> str:
    """One side's threads for a person: `2 (chosen for it: ...)`, `1 (asked for: --threads)`."""
    if rec.get("chosen") is None:
        return f"{threads} (how it was set: not recorded)"
    if rec["chosen"]:
        return f"{threads} (chosen for it: {rec.get('why') or rec['by']})"
    return f"{threads} (asked for: {'--threads' if rec['by'] == '--threads' else 'the study file'})"


def idle_threads(cores: int, busy_cores: float | None) -> int:
    """The cores left to a run when other processes keep `busy_cores` busy, at least one.

    The same line as validity's: others at `OTHERS_OVERSUBSCRIBED_CORES` or more, with more threads than
    the cores they leave, make a case `contended`; so a core is given up as soon as others would tip it.
    """
    if busy_cores is None:
        return cores
    taken = max(0, math.ceil(busy_cores - OTHERS_OVERSUBSCRIBED_CORES))
    return max(1, min(cores, cores - taken))


def threads_now() -> int:
    """The threads a run that sets none would use if it started now: the physical cores other processes leave
    idle (`idle_threads` over BUSY_PROBE_S of activity). The benchmarks time both sides with it."""
    return idle_threads(default_threads(), busy_cores_now(BUSY_PROBE_S))


def choose_threads(store: Store, study: Study, filters: dict[str, Any], *, resume: str | None,
                   new: bool) -> tuple[int, str]:
    """(threads, why) for a run that did not set its threads."""
    ref = resume
    if ref is None and not new:
        ref = store.find_resumable(study=study.name, variant=study.variant, study_hash=study.study_hash,
                                   filters=filters, env_id=None)
    if ref is not None:
        try:
            stored = store.run(store.resolve_run(ref)).settings.get("threads")
        except Exception:  # an unknown --resume reference is reported where the run is resolved
            stored = None
        if stored:
            return int(stored), f"as the unfinished run {ref} started with"
    cores, limit = thread_budget()
    busy = busy_cores_now(BUSY_PROBE_S)
    threads = idle_threads(cores, busy)
    these = (f"{cores} physical cores" if limit is None else
             f"{cores} core{'' if cores == 1 else 's'} this process may use, as {limit}")
    aside = " ({})" if limit is None else "; {}"  # the limit's own words end in parentheses
    if busy is None:
        return threads, f"the {these}" + aside.format("other processes' CPU use is not readable here")
    if threads == cores:
        return threads, f"the {these}" + aside.format(f"other processes used {busy:.1f} cores at the start")
    return threads, (f"{threads} of the {these}: other processes used {busy:.1f} cores at the start, and "
                     f"more threads than free cores wait on each other (set --threads to choose)")


def with_wait(row: CaseResult, waited: IdleWait) -> CaseResult:
    """The row with the idle wait before it recorded in its activity, and its validity judged again."""
    if row.metrics is None or row.metrics.activity is None:
        return row
    # the stored record (`Metrics.activity`, an open dict to pydantic) is the activity `core.validity` reads
    activity = cast("Activity", dict(row.metrics.activity) | {"wait": waited})
    update: dict[str, Activity | str | None] = {"activity": activity}
    if row.measurement is not None:
        update["validity"], update["validity_reason"] = assess(
            Measurement.from_dict(row.measurement), activity, threads=row.metrics.threads, device=row.device)
    return row.model_copy(update={"metrics": row.metrics.model_copy(update=update)})
