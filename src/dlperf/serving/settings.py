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

#: A `workloads.serve.ServeParams` (not imported: `Serve.drive` imports this package, so it imports no workload).
ServeParams = Any

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


def shortened(params: ServeParams) -> list[str]:
    """Why this run is below MLPerf's rules, in words ([]: MLPerf's durations and counts)."""
    scenario = scenario_name(params)
    rule = RULES[scenario]
    out = []
    if params.min_duration_s < rule.min_duration_s:
        out.append(f"min duration {params.min_duration_s:g} s (MLPerf {rule.min_duration_s:g} s)")
    count, _ = min_queries(params)
    if count < rule.min_query_count:
        what = "samples" if scenario == "Offline" else "queries"
        out.append(f"min {what} {count} (MLPerf {rule.min_query_count})")
    return out


def server_max_async(target_qps: float, target_latency_s: float) -> int:
    """LoadGen's cap on outstanding Server queries: a run past it ends early (INVALID). Far above what a run that
    meets its bound keeps outstanding (about rate x latency, Little's law), so it only ends runs that cannot be
    VALID: an overloaded probe, or a SUT whose predict failed (it stops completing, so LoadGen stops)."""
    return int(4 * target_qps * target_latency_s) + 16


def loadgen_settings(params: ServeParams, *, expected_query_s: float | None = None, server_qps: float | None = None,
                  offline_qps: float | None = None) -> Any:
    """LoadGen's `TestSettings` (PerformanceOnly) for the case.

    expected_query_s: a measured query latency, LoadGen's plan for SingleStream and MultiStream (it generates
    queries for twice the min duration at that rate; MultiStream takes `target_latency_ms` first where given);
    server_qps: the offered Server rate (`target_qps` where None); offline_qps: the expected Offline rate
    (`target_qps` where None). A figure LoadGen needs and none of these gives is a ValueError.
    """
    import mlperf_loadgen as lg

    scenario = scenario_name(params)
    rule = RULES[scenario]
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = max(1, round(params.min_duration_s * 1000))
    ts.min_query_count = min_queries(params)[0]
    for key, seed in SEEDS.items():
        setattr(ts, key, seed)
    if scenario == "SingleStream":
        ts.single_stream_expected_latency_ns = _ns(_needed(expected_query_s, "a SingleStream expected latency"))
        ts.single_stream_target_latency_percentile = rule.percentile
    elif scenario == "MultiStream":
        given = params.target_latency_ms / 1e3 if params.target_latency_ms is not None else None
        ts.multi_stream_expected_latency_ns = _ns(_needed(given or expected_query_s, "a MultiStream expected latency"))
        ts.multi_stream_target_latency_percentile = rule.percentile
        ts.multi_stream_samples_per_query = params.samples_per_query
    elif scenario == "Server":
        qps = _needed(server_qps or params.target_qps, "a Server target rate")
        latency_s = _needed(params.target_latency_ms, "a Server latency bound") / 1e3
        ts.server_target_qps = float(qps)
        ts.server_target_latency_ns = _ns(latency_s)
        ts.server_target_latency_percentile = rule.percentile
        ts.server_max_async_queries = server_max_async(qps, latency_s)
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
