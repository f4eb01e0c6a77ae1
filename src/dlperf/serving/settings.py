"""LoadGen's `TestSettings` for a serve case, MLPerf's rule values as data, and what a shortened run lacks.

MLPerf's rules per scenario come from MLCommons' own files for LoadGen 6.0.17 (mlcommons/inference,
`loadgen/mlperf.conf` and the defaults of `loadgen/test_settings.h`); they live in `RULES` and nowhere else.
A case may ask for less (`min_duration_s`, `min_query_count`: `--quick`); `shortened` says what, in words that
every output carries. Early stopping (LoadGen's `early_stopping.cc`, confidence 0.99) needs a minimum number of
queries before a SingleStream, MultiStream or Server run can be VALID at all, so a smaller count asked for is
raised to that floor (`min_queries` says so): a run that can only come out INVALID measures nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlperf.serving.records import LogValue

#: A `workloads.serve.ServeParams` (not imported: `Serve.drive` imports this package, so it imports no workload).
ServeParams = Any

#: The largest latency bound and minimum duration a case may ask for: LoadGen takes them as whole nanoseconds and
#: milliseconds in signed 64-bit integers (a larger value is a TypeError inside the worker); an hour per query
#: and a week per run are past any serving target.
MAX_LATENCY_MS = 3_600_000.0
MAX_DURATION_S = 7 * 86_400.0

#: Where `RULES` come from.
RULES_SOURCE = ("MLCommons inference, loadgen/mlperf.conf and loadgen/test_settings.h at LoadGen 6.0.17 "
                "(min_duration, min_query_count, target_latency_percentile, samples_per_query, the seeds)")


@dataclass(frozen=True)
class Rule:
    """MLPerf's requirement for one scenario."""

    min_duration_s: float
    #: Queries (Offline: samples, LoadGen maps its min query count to samples there).
    min_query_count: int
    #: The latency percentile of the scenario's metric or bound (None: Offline has none).
    percentile: float | None
    #: Where the min query count comes from.
    count_source: str


#: LoadGen's scenario names, by the serve workload's.
SCENARIOS = {"single-stream": "SingleStream", "multi-stream": "MultiStream", "server": "Server",
             "offline": "Offline"}

RULES: dict[str, Rule] = {
    "SingleStream": Rule(600.0, 100, 0.90, "LoadGen's default (mlperf.conf sets none for SingleStream)"),
    "MultiStream": Rule(600.0, 662, 0.99, "mlperf.conf *.MultiStream.min_query_count"),
    "Server": Rule(600.0, 100, 0.99, "LoadGen's default (mlperf.conf sets none for Server)"),
    "Offline": Rule(600.0, 24576, None, "mlperf.conf resnet50/retinanet/dlrm-v2/llama2-70b.Offline.min_query_count "
                                        "(samples; smaller datasets use their size)"),
}
#: mlperf.conf's seeds for every model and scenario.
SEEDS = {"qsl_rng_seed": 2085463073848966840, "sample_index_rng_seed": 2747215439041700203,
         "schedule_rng_seed": 16159082839903944936}
#: The fewest queries with which LoadGen's early stopping can pass (no over-latency query; confidence 0.99):
#: what LoadGen's own messages say ("Need to process at least 64 / 662 queries"), and ceil(log 0.01 / log 0.99)
#: = 459 for Server at p99 (each over-latency query raises it).
EARLY_STOPPING_MIN_QUERIES = {"SingleStream": 64, "MultiStream": 662, "Server": 459, "Offline": 0}
#: mlperf.conf's samples per MultiStream query (every model: *.MultiStream.samples_per_query = 8).
MLPERF_SAMPLES_PER_QUERY = 8
#: The over-latency queries a Server search probe may have and still pass early stopping: its query floor is
#: `early_stopping.server_queries_allowing(SERVER_PROBE_LATE)` (2010 at p99: about 0.5% late), not 459 (none late).
SERVER_PROBE_LATE = 10


def scenario_name(params: ServeParams) -> str:
    """LoadGen's spelling of the case's scenario."""
    return SCENARIOS[params.scenario]


def min_queries(params: ServeParams) -> tuple[int, str | None]:
    """(the min query count LoadGen gets, a note where the count asked for was raised to early stopping's floor)."""
    scenario = scenario_name(params)
    asked = params.min_query_count if params.min_query_count is not None else RULES[scenario].min_query_count
    floor = EARLY_STOPPING_MIN_QUERIES[scenario]
    if asked >= floor:
        return asked, None
    return floor, (f"min queries {asked} raised to {floor}: LoadGen's early stopping cannot pass a {scenario} run "
                   f"with fewer")


def server_probe_queries(params: ServeParams) -> tuple[int, int]:
    """(the min query count of a Server search probe, the over-latency queries early stopping allows at it): the
    case's count, raised to what lets `SERVER_PROBE_LATE` queries be late."""
    from dlperf.serving.early_stopping import server_queries_allowing

    asked = min_queries(params)[0]
    percentile = RULES["Server"].percentile or 0.99
    floor = server_queries_allowing(SERVER_PROBE_LATE, percentile)
    if asked >= floor:
        late = SERVER_PROBE_LATE
        while server_queries_allowing(late + 1, percentile) <= asked:
            late += 1
        return asked, late
    return floor, SERVER_PROBE_LATE


def shortened_effective(scenario: str, effective: dict[str, LogValue]) -> list[str]:
    """Why a finished run was below MLPerf's rules, from the `effective_*` values LoadGen logged for it (what it
    ran, not what was asked: Offline issues max(min, 1.1 x duration x rate) samples)."""
    rule = RULES[scenario]
    out = []
    ms = effective.get("effective_min_duration_ms")
    if isinstance(ms, int | float) and ms / 1e3 < rule.min_duration_s:
        out.append(f"min duration {ms / 1e3:g} s (MLPerf {rule.min_duration_s:g} s)")
    if scenario == "Offline":
        count, what = effective.get("effective_min_sample_count"), "samples"
    else:
        count, what = effective.get("effective_min_query_count"), "queries"
    if isinstance(count, int | float) and count < rule.min_query_count:
        out.append(f"min {what} {count:g} (MLPerf {rule.min_query_count})")
    per_query = effective.get("effective_samples_per_query")
    if scenario == "MultiStream" and isinstance(per_query, int) and per_query != MLPERF_SAMPLES_PER_QUERY:
        out.append(f"samples per query {per_query} (MLPerf {MLPERF_SAMPLES_PER_QUERY})")
    cap = effective.get("effective_max_async_queries")
    if scenario == "Server" and isinstance(cap, int) and cap > 0:
        out.append(f"outstanding-query cap {cap} (MLPerf: none)")
    return out


def shortened(params: ServeParams) -> list[str]:
    """Why this run is planned below MLPerf's rules, in words ([]: MLPerf's durations and counts); what is stored
    comes from the run's effective values (`shortened_effective`)."""
    scenario = scenario_name(params)
    rule = RULES[scenario]
    out = []
    if params.min_duration_s < rule.min_duration_s:
        out.append(f"min duration {params.min_duration_s:g} s (MLPerf {rule.min_duration_s:g} s)")
    count, _ = min_queries(params)
    if count < rule.min_query_count:
        what = "samples" if scenario == "Offline" else "queries"
        out.append(f"min {what} {count} (MLPerf {rule.min_query_count})")
    if scenario == "MultiStream" and params.samples_per_query != MLPERF_SAMPLES_PER_QUERY:
        out.append(f"samples per query {params.samples_per_query} (MLPerf {MLPERF_SAMPLES_PER_QUERY})")
    return out


def server_max_async(target_qps: float, target_latency_s: float) -> int:
    """A cap on outstanding Server queries for search probes only (MLPerf has none: LoadGen's default 0): a run
    past it ends early (INVALID). Far above what a run that meets its bound keeps outstanding (about rate x
    latency, Little's law), so it ends overloaded probes quickly; the search's confirming run and a Server case
    with a given rate run without it, and a run that had it says so in `shortened`."""
    return int(4 * target_qps * target_latency_s) + 16


def loadgen_settings(params: ServeParams, *, expected_query_s: float | None = None, server_qps: float | None = None,
                     offline_qps: float | None = None, min_query_count: int | None = None,
                     max_async: int = 0) -> Any:
    """LoadGen's `TestSettings` (PerformanceOnly) for the case.

    expected_query_s: the query latency LoadGen plans SingleStream and MultiStream with (it generates queries for
    about twice the min duration at that rate: `driver` passes the measured one, for MultiStream the smaller of
    it and `target_latency_ms`); server_qps: the offered Server rate (`target_qps` where None); offline_qps: the
    expected Offline rate (`target_qps` where None); min_query_count: over the case's (a search probe's floor);
    max_async: Server's outstanding-query cap (0: none, MLPerf's). A figure LoadGen needs and none of these gives
    is a ValueError.
    """
    import mlperf_loadgen as lg

    scenario = scenario_name(params)
    rule = RULES[scenario]
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = max(1, round(params.min_duration_s * 1000))
    ts.min_query_count = min_query_count or min_queries(params)[0]
    for key, seed in SEEDS.items():
        setattr(ts, key, seed)
    if scenario == "SingleStream":
        ts.single_stream_expected_latency_ns = _ns(_needed(expected_query_s, "a SingleStream expected latency"))
        ts.single_stream_target_latency_percentile = rule.percentile
    elif scenario == "MultiStream":
        ts.multi_stream_expected_latency_ns = _ns(_needed(expected_query_s, "a MultiStream expected latency"))
        ts.multi_stream_target_latency_percentile = rule.percentile
        ts.multi_stream_samples_per_query = params.samples_per_query
    elif scenario == "Server":
        qps = _needed(server_qps or params.target_qps, "a Server target rate")
        latency_s = _needed(params.target_latency_ms, "a Server latency bound") / 1e3
        ts.server_target_qps = float(qps)
        ts.server_target_latency_ns = _ns(latency_s)
        ts.server_target_latency_percentile = rule.percentile
        ts.server_max_async_queries = int(max_async)
    else:
        ts.offline_expected_qps = float(_needed(offline_qps or params.target_qps, "an Offline expected rate"))
    return ts


def log_settings(outdir: str) -> Any:
    """LoadGen's `LogSettings`: its logs in `outdir`, no trace, nothing copied to stdout."""
    import mlperf_loadgen as lg

    ls = lg.LogSettings()
    ls.log_output.outdir = outdir
    ls.log_output.copy_summary_to_stdout = False
    ls.log_output.copy_detail_to_stdout = False
    ls.enable_trace = False
    return ls


def _needed(value: float | None, what: str) -> float:
    if value is None or value <= 0:
        raise ValueError(f"LoadGen needs {what} (got {value})")
    return float(value)


def _ns(seconds: float) -> int:
    return max(1, round(seconds * 1e9))
