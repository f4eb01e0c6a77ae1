"""`drive`: a serve case's metrics, from its built step under LoadGen (what `workloads.serve.Serve.drive` calls).

Before LoadGen starts, every batch size the scenario will use is run once (warm-up: first-call costs stay out of
LoadGen's latencies), and the step's speed is read from a few more calls (the median of `SPEED_CALLS`): LoadGen
plans with it (SingleStream and MultiStream expected latencies, the Offline expected rate where none is given)
and the Server search starts from it. Those calls are dlperf's, not LoadGen's, and are stored as such
(`sut["speed"]`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dlperf.serving import settings as lgs
from dlperf.serving.run import run_loadgen, samples_per_s
from dlperf.serving.search import search_server

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
    times.sort()
    return times[len(times) // 2]


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


def drive(fw: Any, device: str, params: Any, step: Any, settings: Any) -> dict[str, Any]:
    """The case's metrics: `loadgen`, `sut`, `samples_per_s`, and for a Server case without target_qps
    `server_search` (the stored format of a serve case; the worker adds the machine's figures)."""
    predict = step.predict
    if predict is None:
        raise ValueError("this step has no predict: it cannot be served")
    scenario = lgs.scenario_name(params)
    notes: list[str] = []
    count_note = lgs.min_queries(params)[1]
    if count_note:
        notes.append(count_note)
    mb = params.max_batch
    for n in batch_sizes(params):
        predict(n)  # warm-up
    speed: dict[str, Any] = {"calls": SPEED_CALLS, "what": "median of dlperf's calls after warm-up, before LoadGen"}
    speed["predict_1_s"] = _median_s(predict, 1)
    if scenario != "SingleStream" and mb > 1:
        size = min(mb, params.samples_per_query) if scenario == "MultiStream" else mb
        speed[f"predict_{size}_s"] = _median_s(predict, size)
    shortened = lgs.shortened(params)

    def once(**plan: Any) -> dict[str, Any]:
        ts = lgs.loadgen_settings(params, **plan)
        loadgen, sut = run_loadgen(predict, mb, ts, sample_pool=params.sample_pool, shortened=shortened)
        return {"loadgen": loadgen, "sut": sut}

    search = None
    if scenario == "SingleStream":
        run = once(expected_query_s=speed["predict_1_s"])
    elif scenario == "MultiStream":
        size = min(mb, params.samples_per_query)
        chunks = max(1, params.samples_per_query // size)
        run = once(expected_query_s=chunks * speed.get(f"predict_{size}_s", speed["predict_1_s"]))
    elif scenario == "Offline":
        qps = params.target_qps
        if qps is None:
            measured = mb / speed.get(f"predict_{mb}_s", speed["predict_1_s"])
            qps = OFFLINE_PLAN_MARGIN * measured
            notes.append(f"offline expected rate {qps:.4g} samples/s: {OFFLINE_PLAN_MARGIN:g} x the {measured:.4g} "
                         f"measured from predict({mb}) before the run (no target_qps given)")
        for n in batch_sizes(params, offline_sample_count(params, qps)):
            predict(n)  # the last chunk's size, once
        run = once(offline_qps=qps)
    elif params.target_qps is not None:
        run = once(server_qps=params.target_qps)
    else:
        start = SEARCH_START_FRACTION / speed["predict_1_s"]
        search, run = search_server(lambda qps: once(server_qps=qps), start_qps=start,
                                    max_probes=params.search_probes,
                                    target_latency_s=params.target_latency_ms / 1e3,
                                    percentile=lgs.RULES["Server"].percentile or 0.99)
        notes.append(f"search started at {start:.4g} queries/s: {SEARCH_START_FRACTION:g} / the median "
                     f"predict(1) time")
    loadgen = run["loadgen"] | {"notes": notes}
    metrics: dict[str, Any] = {"loadgen": loadgen, "sut": run["sut"] | {"speed": speed},
                               "samples_per_s": samples_per_s(loadgen)}
    if search is not None:
        metrics["server_search"] = search
    return metrics
