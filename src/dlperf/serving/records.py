"""The JSON shapes `dlperf.serving` writes, as TypedDicts (plain dicts at run time: what is stored is unchanged):
one LoadGen run's `metrics["loadgen"]` and the SUT's `metrics["sut"]`, and the Server search's
`metrics["server_search"]` with its probes. `core.payloads` reads the stored ones back.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from dlperf.meters.activity import ActivityWindow

#: A value LoadGen logged on a `:::MLLOG {json}` line of its detail log: whatever JSON it wrote under the key.
LogValue = None | bool | int | float | str | list["LogValue"] | dict[str, "LogValue"]


class MetricRecord(TypedDict):
    """The scenario's MLPerf metric: its name, its value (None: none logged), its unit ("s" for a latency)."""

    name: str
    value: float | None
    unit: str


class LoadgenRecord(TypedDict):
    """One LoadGen run's verdict from its own logs (`run.loadgen_dict`), with what the driver adds to it."""

    scenario: str
    #: VALID or INVALID, as LoadGen logged it.
    validity: str
    invalid_reasons: list[str]
    metric: MetricRecord
    #: LoadGen's result_* and early_stopping_* values by its own key (latencies in ns).
    results: dict[str, LogValue]
    #: LoadGen's effective_* settings by its own key.
    effective: dict[str, LogValue]
    loadgen_version: str
    errors: list[str]
    #: mlperf_log_summary.txt, verbatim.
    summary_text: str
    #: Why the run was shorter than MLPerf's rules (`settings.shortened_effective`).
    shortened: list[str]
    notes: NotRequired[list[str]]
    #: The run's own activity window (`meters.activity.Monitor.stop`: others' cores, its own, steal...).
    activity: NotRequired[ActivityWindow]


class SutStats(TypedDict):
    """The SUT's batches (`sut.ServingSUT.stats`): how many, how many of each size (by the size as text), the
    median predict time of a batch (s; None: none ran)."""

    max_batch: int
    batches: int
    batch_size_counts: dict[str, int]
    predict_s_median: float | None


class ProbeSettings(TypedDict):
    """What a Server search probe ran under beyond its rate (`driver.drive`): its least queries, the late ones
    early stopping then allows, its cap on outstanding queries (None: none, the confirming run)."""

    min_queries: int
    late_queries_allowed: int
    max_async_queries: int | None


class ServedRun(TypedDict):
    """One LoadGen run of a case: its verdict and the SUT's stats (and a probe's settings, in the search)."""

    loadgen: LoadgenRecord
    sut: SutStats
    probe: NotRequired[ProbeSettings]


class ProbeRow(TypedDict):
    """One probe as `server_search["probes"]` stores it (`search.probe_row`): the offered rate (queries/s),
    LoadGen's verdict, the completed rate, the p99 latency (s), the probe's wall time (s) and role, with the
    probe's settings where it ran under some."""

    target_qps: float
    validity: str
    completed_qps: float | None
    latency_p99_s: float | None
    invalid_reasons: list[str]
    wall_s: float
    role: str
    late_queries: int | None
    query_count: LogValue
    activity: ActivityWindow | None  # the run's `LoadgenRecord.activity`
    min_queries: NotRequired[int]
    late_queries_allowed: NotRequired[int]
    max_async_queries: NotRequired[int | None]


class ServerSearchRecord(TypedDict):
    """A Server case's search for the highest VALID offered rate (`search.search_server`): the latency bound
    (s) at its percentile, every probe in the order run, the best VALID rate (None: none), whether a run without
    the probes' cap confirmed it, and why the search stopped."""

    target_latency_s: float
    percentile: float
    probes: list[ProbeRow]
    best_qps: float | None
    confirmed: bool
    stopped: str
