"""`drive`: a serve case's metrics, from its built step under LoadGen (what `workloads.serve.Serve.drive` calls).

Before LoadGen starts, every batch size the scenario will use is run once (warm-up: first-call costs stay out of
LoadGen's latencies), and the step's speed is read from a few more calls (the median of `SPEED_CALLS`): LoadGen
plans with it (SingleStream and MultiStream expected latencies, the Offline expected rate where none is given)
and the Server search starts from it. Those calls are dlperf's, not LoadGen's, and are stored as such
(`sut["speed"]`). MultiStream plans with the smaller of `target_latency_ms` and the measured query latency
(LoadGen generates queries for only about twice the min duration at the planned rate).

Every LoadGen run is planned against the worker's time-out (`plan.Budget`): a scenario of one run that cannot
finish in time ends the case with an error saying to raise `timeout_s`; the Server search stops at the budget
with the probes it has. A Server case whose step needs longer than the bound for one sample is not searched.
Each run's own activity window (others' cores, its own, steal) is stored with it (`loadgen["activity"]`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dlperf.serving import settings as lgs
from dlperf.serving.plan import Budget, planned_run_s
from dlperf.serving.records import ServedRun, ServerSearchRecord
from dlperf.serving.run import run_loadgen, samples_per_s
from dlperf.serving.search import search_server

if TYPE_CHECKING:
    from dlperf.core.settings import RunSettings
    from dlperf.frameworks import Framework

#: Calls per batch size whose median gives the step's speed (after its warm-up call).
SPEED_CALLS = 5
#: The Offline expected rate LoadGen plans with, over the measured one: LoadGen generates samples for only 1.1x
#: the min duration at the expected rate, so a SUT faster than planned ends before the min duration (INVALID).
OFFLINE_PLAN_MARGIN = 1.25
#: The Server search starts at this fraction of the rate one-sample batches sustain.
SEARCH_START_FRACTION = 0.5


def _median_s(predict: Callable[[int], object], n: int, calls: int = SPEED_CALLS) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        predict(n)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def batch_sizes(params: Any, offline_samples: int | None = None) -> list[int]:
    """The predict sizes the scenario's SUT will call (warmed up once each before LoadGen starts)."""
    mb, scenario = params.max_batch, lgs.scenario_name(params)
    if scenario == "SingleStream":
        return [1]
    if scenario == "Server":
        return list(range(1, mb + 1))  # it coalesces whatever is waiting
    total = params.samples_per_query if scenario == "MultiStream" else offline_samples
    sizes = {min(mb, total)} if total else {mb}
    if total and total > mb and total % mb:
        sizes.add(total % mb)
    return sorted(sizes)


def offline_sample_count(params: Any, expected_qps: float) -> int:
    """The samples of LoadGen's one Offline query: max(min count, 1.1 x min duration x expected rate)
    (LoadGen's test_settings_internal.cc)."""
    return max(lgs.min_queries(params)[0], int(1.1 * params.min_duration_s * expected_qps))


def _plan_multistream(params: Any, measured_s: float) -> tuple[float, str]:
    """(the query latency LoadGen plans MultiStream with, a note saying which): the smaller of target_latency_ms
    and the measured one. LoadGen generates queries for only about twice the min duration at the planned rate, so
    a planned latency of twice the real one or more runs out of queries (INVALID: min duration not met)."""
    given = params.target_latency_ms / 1e3 if params.target_latency_ms is not None else None
    if given is not None and given <= measured_s:
        return given, (f"multi-stream planned with target_latency_ms {given * 1e3:.4g} ms (measured "
                       f"{measured_s * 1e3:.4g} ms)")
    what = f"; target_latency_ms {given * 1e3:.4g} ms is larger" if given is not None else ""
    return measured_s, f"multi-stream planned with the measured query latency {measured_s * 1e3:.4g} ms{what}"


def _no_run(speed: dict[str, Any], mb: int, search: ServerSearchRecord, why: str) -> dict[str, Any]:
    """A Server case whose search ran no LoadGen run (its stored search says why)."""
    return {"sut": {"max_batch": mb, "batches": 0, "batch_size_counts": {}, "predict_s_median": None, "speed": speed},
            "server_search": search, "samples_per_s": None, "samples_per_s_reason": f"no LoadGen run: {why}"}


def drive(fw: Framework, device: str, params: Any, step: Any, settings: RunSettings) -> dict[str, Any]:
    """The case's metrics: `loadgen`, `sut`, `samples_per_s` (with `samples_per_s_reason` where None), and for a
    Server case without target_qps `server_search` (the stored format of a serve case; the worker adds the
    machine's figures). Plans against the worker's time-out (`plan.Budget` from `settings.timeout_s`)."""
    from dlperf.meters.activity import Monitor

    predict = step.predict
    if predict is None:
        raise ValueError("this step has no predict: it cannot be served")
    budget = Budget(settings)
    scenario = lgs.scenario_name(params)
    notes: list[str] = []
    count, count_note = lgs.min_queries(params)
    if count_note:
        notes.append(count_note)
    mb, dur = params.max_batch, params.min_duration_s
    for n in batch_sizes(params):
        predict(n)  # warm-up
    speed: dict[str, Any] = {"calls": SPEED_CALLS, "what": "median of dlperf's calls after warm-up, before LoadGen"}
    speed["predict_1_s"] = _median_s(predict, 1)
    if scenario != "SingleStream" and mb > 1:
        size = min(mb, params.samples_per_query) if scenario == "MultiStream" else mb
        speed[f"predict_{size}_s"] = _median_s(predict, size)
    capacity = mb / speed.get(f"predict_{mb}_s", speed["predict_1_s"])  # samples/s at full batches

    def once(**plan: Any) -> ServedRun:
        ts = lgs.loadgen_settings(params, **plan)
        monitor = Monitor()
        monitor.start("run", top=True)
        try:
            loadgen, sut = run_loadgen(predict, mb, ts, sample_pool=params.sample_pool)
        finally:
            activity = monitor.stop("run")
        loadgen["activity"] = activity  # this run's own window: others_cores, own_cores, steal_frac, ...
        return {"loadgen": loadgen, "sut": sut}

    search: ServerSearchRecord | None = None
    if scenario == "SingleStream":
        budget.require(planned_run_s(dur, count, 1 / speed["predict_1_s"]), "SingleStream run")
        run = once(expected_query_s=speed["predict_1_s"])
    elif scenario == "MultiStream":
        size = min(mb, params.samples_per_query)
        chunks = math.ceil(params.samples_per_query / size)
        measured = chunks * speed.get(f"predict_{size}_s", speed["predict_1_s"])
        expected, note = _plan_multistream(params, measured)
        notes.append(note)
        budget.require(planned_run_s(dur, count, 1 / measured), "MultiStream run")
        run = once(expected_query_s=expected)
    elif scenario == "Offline":
        qps = params.target_qps
        if qps is None:
            qps = OFFLINE_PLAN_MARGIN * capacity
            notes.append(f"offline expected rate {qps:.4g} samples/s: {OFFLINE_PLAN_MARGIN:g} x the {capacity:.4g} "
                         f"measured from predict({mb}) before the run (no target_qps given)")
        samples = offline_sample_count(params, qps)
        budget.require(planned_run_s(dur, samples, capacity), "Offline run")
        for n in batch_sizes(params, samples):
            predict(n)  # the last chunk's size, once
        run = once(offline_qps=qps)
    elif params.target_qps is not None:
        qps = params.target_qps
        budget.require(planned_run_s(dur, count, qps, drain_s=max(dur, count / qps) * qps / capacity), "Server run")
        run = once(server_qps=qps)
    else:
        latency_s = params.target_latency_ms / 1e3
        percentile = lgs.RULES["Server"].percentile or 0.99
        if speed["predict_1_s"] > latency_s:
            why = (f"no rate can be VALID: one sample's predict takes {speed['predict_1_s'] * 1e3:.4g} ms (median "
                   f"before LoadGen), over the {latency_s * 1e3:g} ms bound")
            search = {"target_latency_s": latency_s, "percentile": percentile, "probes": [], "best_qps": None,
                      "confirmed": False, "stopped": why}
            return _no_run(speed, mb, search, why)
        floor, late = lgs.server_probe_queries(params)

        def probe(qps: float, confirm: bool) -> ServedRun:
            cap = 0 if confirm else lgs.server_max_async(qps, latency_s)
            out = once(server_qps=qps, min_query_count=floor, max_async=cap)
            return out | {"probe": {"min_queries": floor, "late_queries_allowed": late,
                                    "max_async_queries": cap or None}}

        def planned(qps: float, confirm: bool) -> float:
            drain = max(dur, floor / qps) * qps / capacity if confirm else 0.0  # a capped probe ends when overloaded
            return planned_run_s(dur, floor, qps, drain_s=drain)

        start = SEARCH_START_FRACTION / speed["predict_1_s"]
        search, found = search_server(probe, start_qps=start, max_probes=params.search_probes,
                                      target_latency_s=latency_s, percentile=percentile, planned_s=planned,
                                      time_left_s=budget.left_s)
        notes.append(f"search started at {start:.4g} queries/s: {SEARCH_START_FRACTION:g} / the median "
                     f"predict(1) time; its runs issue at least {floor} queries (early stopping then allows {late} "
                     f"late); probes cap outstanding queries at 4 x rate x bound + 16, the confirming run does not")
        if found is None:
            return _no_run(speed, mb, search, search["stopped"])
        run = found
    loadgen = run["loadgen"]
    loadgen["notes"] = loadgen.get("notes", []) + notes
    rate, rate_why = samples_per_s(loadgen)
    metrics: dict[str, Any] = {"loadgen": loadgen, "sut": run["sut"] | {"speed": speed}, "samples_per_s": rate}
    if rate_why is not None:
        metrics["samples_per_s_reason"] = rate_why
    if search is not None:
        metrics["server_search"] = search
    return metrics
