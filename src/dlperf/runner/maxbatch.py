"""`dlperf maxbatch`: the largest batch of a CNN training step that fits, by doubling then bisecting.

Every probe is a fresh worker (so one probe's memory never helps or hurts the
next) and is stored as a result of its own run, out-of-memory probes included.
Out of memory means: the framework's OOM error, a kill by the kernel's OOM
killer, or the worker's memory cap (`mem_limit_mb`, RLIMIT_DATA), including an
ambiguous error a fresh worker has shown to be the cap's (runner.recheck). Any other
failure stops the search and is reported as what it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from dlperf.core.settings import RunSettings
from dlperf.errors import StudyError
from dlperf.frameworks import get_framework
from dlperf.hardware.identity import derived, identity_hash
from dlperf.hardware.probe import default_threads
from dlperf.runner.events import RunEvents
from dlperf.runner.lifecycle import NewRun, open_run
from dlperf.runner.sweep import collect_fingerprint, run_case
from dlperf.store import Store
from dlperf.studies import Case

#: The settings a maxbatch run stores (in this order): the ones a probe's timing depends on.
STORED_SETTINGS = ("steps", "warmup", "timeout_s", "mem_limit_mb", "threads", "energy", "seed")


@dataclass
class Probe:
    batch: int
    status: str
    reason: str | None
    peak_bytes: int | None
    time_per_image_s: float | None


@dataclass
class MaxBatch:
    run_id: str
    largest: int | None  # None: not even the first batch fits
    first_oom: int | None  # None: the search reached max_batch without an OOM
    stopped: str | None = None  # why the search stopped early (a non-OOM failure)
    probes: list[Probe] = field(default_factory=list)


def check_search(*, model: str, framework: str, image_size: int | None, precision: str, start: int,
                 max_batch: int) -> dict[str, Any]:
    """The search's fixed parameters (model, precision, image size), checked: a StudyError names the first bad
    one. Called before the store is opened, so a bad request creates nothing."""
    from dlperf.workloads.cnn import CnnParams

    try:
        get_framework(framework)
    except KeyError as exc:
        raise StudyError(f"--framework: {exc.args[0]}") from None
    base = {"model": model, "precision": precision} | ({"image_size": image_size} if image_size else {})
    try:
        CnnParams.model_validate(base | {"batch": start})
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        msg = errors()[0]["msg"] if callable(errors) else str(exc)
        raise StudyError(f"maxbatch: {msg}") from None
    if start < 1 or max_batch < start:
        raise StudyError("maxbatch: need 1 <= --start <= --max-batch")
    return base


def search(store: Store, *, model: str, framework: str, device: str, image_size: int | None = None,
           precision: str = "fp32", mem_limit_mb: int | None = None, start: int = 1, max_batch: int = 8192,
           steps: int = 2, timeout_s: float = 1800.0, threads: int | None = None, exact: bool = False,
           events: RunEvents | None = None) -> MaxBatch:
    """Double the batch from `start` until a probe runs out of memory, then bisect to the boundary:
    to within 1/32 of it (about 3%), or to the exact batch with `exact`."""
    events = events or RunEvents()
    base = check_search(model=model, framework=framework, image_size=image_size, precision=precision, start=start,
                        max_batch=max_batch)
    settings = RunSettings(frameworks=[framework], devices=[device], steps=steps, warmup=1, timeout_s=timeout_s,
                           mem_limit_mb=mem_limit_mb, threads=threads or default_threads(), energy=False, seed=0)
    fp = collect_fingerprint([framework], settings.threads)
    env_id = store.environment_id(fp, identity_hash(fp))
    stored = settings.stored()
    stored = {key: stored[key] for key in STORED_SETTINGS}
    identity = {"model": model, "framework": framework, "device": device, "params": base, "settings": stored}
    new_run = NewRun(
        study="maxbatch", variant=model,
        study_hash=hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16],
        study_path="(dlperf maxbatch)", filters={"framework": framework, "device": device, "start": start,
                                                  "max_batch": max_batch},
        settings=stored, env_id=env_id, n_cases=0, derived=derived(fp))
    with open_run(store, new_run) as run:
        out = _search(store, run.run_id, env_id, settings, base, model=model, start=start, max_batch=max_batch,
                      exact=exact, events=events)
        if out.stopped is not None:
            run.status = "failed"
    return out


def _search(store: Store, run_id: str, env_id: int, settings: RunSettings, base: dict[str, Any], *, model: str,
            start: int, max_batch: int, exact: bool, events: RunEvents) -> MaxBatch:
    """The doubling and the bisection, each probe stored in run `run_id` as it ends."""
    framework, device, mem_limit_mb = settings.frameworks[0], settings.devices[0], settings.mem_limit_mb
    out = MaxBatch(run_id, None, None)
    events.search_opened(run_id, model=model, framework=framework, device=device, mem_limit_mb=mem_limit_mb)

    def probe(batch: int) -> Probe:
        case = Case("cnn", framework, device, base | {"batch": batch})
        row = run_case(case, settings, run_id, env_id)
        store.add_result(row)
        peak, _ = row.peak_memory()
        p = Probe(batch, row.status, row.reason, peak, row.m.time_per_sample_s)
        out.probes.append(p)
        events.probe_done(batch, row)
        return p

    lo, hi = None, None
    batch = start
    while batch <= max_batch:  # doubling
        p = probe(batch)
        if p.status == "ok":
            lo, batch = batch, batch * 2
            continue
        if p.status == "oom":
            hi = batch
        else:
            out.stopped = f"batch {batch} ended {p.status}: {p.reason}"
        break

    def close_enough(lo: int, hi: int) -> bool:
        return hi - lo <= (1 if exact else max(1, lo // 32))

    while out.stopped is None and lo is not None and hi is not None and not close_enough(lo, hi):  # bisection
        mid = (lo + hi) // 2
        p = probe(mid)
        if p.status == "ok":
            lo = mid
        elif p.status == "oom":
            hi = mid
        else:
            out.stopped = f"batch {mid} ended {p.status}: {p.reason}"
    out.largest, out.first_oom = lo, hi
    return out
