"""A case's workload payloads as typed objects, each read in one place: a served case's LoadGen summary
(`metrics["loadgen"]`) and its Server rate search (`metrics["server_search"]`), a ddp job's record
(`metrics["ddp"]`, `DdpMetrics`) and a collectives job's (`metrics["collective"]`, `CollectiveMetrics`).

The store keeps them as the dicts `dlperf.serving` and `dlperf.distributed` wrote (an export gives them back
unchanged); `read` turns one into its object for every reader above (the run table, the serving, ddp and
collectives reports, the CSV export, `dlperf serve`'s verdict line). A key that is not stored, or not of its
type, reads as absent, never as a figure from elsewhere: the readers print "-" with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _text(value: object) -> str | None:
    """A stored string field: None where it is missing or empty."""
    return str(value) if value else None


def _texts(value: object) -> tuple[str, ...]:
    """A stored list of strings: () where it is missing, empty or not a list."""
    return tuple(str(x) for x in value) if isinstance(value, list | tuple) else ()


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: object) -> float | None:
    """A stored figure as a float: None where it is missing or not a number."""
    return float(value) if isinstance(value, int | float) else None


def _int(value: object) -> int | None:
    """A stored count: None where it is missing or not an int (a bool is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class LoadgenMetric:
    """The scenario's MLPerf metric as stored: its name, its value (None: none), its unit ("s" for a latency)."""

    name: str | None
    value: int | float | None
    unit: str | None

    @classmethod
    def read(cls, raw: object) -> LoadgenMetric | None:
        """The stored metric dict as a metric; None where none (or an empty one) is stored."""
        if not isinstance(raw, dict) or not raw:
            return None
        value = raw.get("value")
        return cls(name=_text(raw.get("name")), value=value if isinstance(value, int | float) else None,
                   unit=_text(raw.get("unit")))


@dataclass(frozen=True)
class LoadgenSummary:
    """LoadGen's verdict on one served case, from its own logs."""

    #: LoadGen's name of the scenario it ran (SingleStream, MultiStream, Server, Offline).
    scenario: str | None = None
    #: VALID or INVALID (None: not stored).
    validity: str | None = None
    invalid_reasons: tuple[str, ...] = ()
    metric: LoadgenMetric | None = None
    #: LoadGen's result_* and early_stopping_* values by its own key (latencies in ns).
    results: Mapping[str, Any] = field(default_factory=dict)
    #: LoadGen's effective_* settings by its own key.
    effective: Mapping[str, Any] = field(default_factory=dict)
    loadgen_version: str | None = None
    #: Why the run was shorter than MLPerf's rules: () where it was not, None where a row predates the field.
    shortened: tuple[str, ...] | None = None
    #: True where the stored summary had no key at all.
    empty: bool = False

    @classmethod
    def read(cls, raw: object) -> LoadgenSummary | None:
        """The stored `metrics["loadgen"]` as a summary; None where the case stored none (no dict)."""
        if not isinstance(raw, dict):
            return None
        validity = raw.get("validity")
        return cls(scenario=_text(raw.get("scenario")), validity=None if validity is None else str(validity),
                   invalid_reasons=_texts(raw.get("invalid_reasons")), metric=LoadgenMetric.read(raw.get("metric")),
                   results=_mapping(raw.get("results")), effective=_mapping(raw.get("effective")),
                   loadgen_version=_text(raw.get("loadgen_version")),
                   shortened=_texts(raw.get("shortened")) if "shortened" in raw else None, empty=not raw)


@dataclass(frozen=True)
class SearchProbe:
    """One LoadGen run of the Server rate search: the offered rate (samples/s), LoadGen's verdict and reasons, the
    completed samples/s, the 99th percentile latency (s) and the probe's wall time (s)."""

    target_qps: float | None = None
    validity: str | None = None
    invalid_reasons: tuple[str, ...] = ()
    completed_qps: float | None = None
    latency_p99_s: float | None = None
    wall_s: float | None = None

    @classmethod
    def read(cls, raw: object) -> SearchProbe:
        """A stored probe (one that is not a dict reads as a probe with nothing stored)."""
        p = _mapping(raw)
        validity = p.get("validity")
        return cls(target_qps=_number(p.get("target_qps")), validity=None if validity is None else str(validity),
                   invalid_reasons=_texts(p.get("invalid_reasons")), completed_qps=_number(p.get("completed_qps")),
                   latency_p99_s=_number(p.get("latency_p99_s")), wall_s=_number(p.get("wall_s")))


@dataclass(frozen=True)
class ServerSearch:
    """A Server case's search for the highest offered rate LoadGen judges VALID."""

    probes: tuple[SearchProbe, ...] = ()
    #: The highest VALID offered rate (samples/s); None: none was VALID.
    best_qps: float | None = None
    #: The latency bound (s) at its percentile (0.99 unless the rules say otherwise).
    target_latency_s: float | None = None
    percentile: float | None = None
    #: False where a run without the probes' outstanding-query cap did not confirm `best_qps`.
    confirmed: bool = True
    #: Why the search stopped (None: not stored).
    stopped: str | None = None

    @classmethod
    def read(cls, raw: object) -> ServerSearch | None:
        """The stored `metrics["server_search"]` as a search; None where the case ran none (no dict)."""
        if not isinstance(raw, dict):
            return None
        probes = raw.get("probes")
        stopped = raw.get("stopped")
        return cls(probes=tuple(SearchProbe.read(p) for p in probes) if isinstance(probes, list | tuple) else (),
                   best_qps=_number(raw.get("best_qps")), target_latency_s=_number(raw.get("target_latency_s")),
                   percentile=_number(raw.get("percentile")), confirmed=bool(raw.get("confirmed", True)),
                   stopped=None if stopped is None else str(stopped))


@dataclass(frozen=True)
class DdpComm:
    """A ddp job's communication per step under torch's profiler (`dlperf.distributed.ddp_profile.combine`): the
    least over the ranks, the most, the profiled step and their ratio (seconds; None: not measured), its note."""

    comm_s_per_step: float | None = None
    comm_s_per_step_max: float | None = None
    step_s_profiled: float | None = None
    comm_fraction: float | None = None
    #: The rank whose figure `comm_s_per_step` is (None: none measured).
    comm_rank: int | None = None
    source: str | None = None
    profiled_steps: int | None = None
    note: str | None = None

    @classmethod
    def read(cls, raw: object) -> DdpComm | None:
        """The stored `metrics["ddp"]["comm"]`; None where none (no dict) is stored."""
        if not isinstance(raw, dict):
            return None
        return cls(comm_s_per_step=_number(raw.get("comm_s_per_step")),
                   comm_s_per_step_max=_number(raw.get("comm_s_per_step_max")),
                   step_s_profiled=_number(raw.get("step_s_profiled")), comm_fraction=_number(raw.get("comm_fraction")),
                   comm_rank=_int(raw.get("comm_rank")), source=_text(raw.get("source")),
                   profiled_steps=_int(raw.get("profiled_steps")), note=_text(raw.get("note")))


@dataclass(frozen=True)
class DdpMetrics:
    """A ddp job's record (`dlperf.distributed.ddp.drive`): its ranks, backend and batches, each rank's median step
    time and the profiled communication. The ranks' own records (`ranks`, `launcher`) stay in the stored dict."""

    world_size: int | None = None
    nodes: int | None = None
    nproc_per_node: int | None = None
    backend: str | None = None
    scaling: str | None = None
    global_batch: int | None = None
    batch_per_rank: int | None = None
    threads_per_rank: int | None = None
    #: What a sample is (image, token).
    sample_unit: str | None = None
    warmup_steps: int | None = None
    steps_timed: int | None = None
    #: Each rank's own median step time (s), in rank order; None where a rank's is not a number.
    rank_step_s_median: tuple[float | None, ...] = ()
    comm: DdpComm | None = None

    @classmethod
    def read(cls, raw: object) -> DdpMetrics | None:
        """The stored `metrics["ddp"]` as a record; None where the case stored none (no dict)."""
        if not isinstance(raw, dict):
            return None
        steps = raw.get("rank_step_s_median")
        return cls(world_size=_int(raw.get("world_size")), nodes=_int(raw.get("nodes")),
                   nproc_per_node=_int(raw.get("nproc_per_node")), backend=_text(raw.get("backend")),
                   scaling=_text(raw.get("scaling")), global_batch=_int(raw.get("global_batch")),
                   batch_per_rank=_int(raw.get("batch_per_rank")), threads_per_rank=_int(raw.get("threads_per_rank")),
                   sample_unit=_text(raw.get("sample_unit")), warmup_steps=_int(raw.get("warmup_steps")),
                   steps_timed=_int(raw.get("steps_timed")),
                   rank_step_s_median=tuple(_number(t) for t in steps) if isinstance(steps, list | tuple) else (),
                   comm=DdpComm.read(raw.get("comm")))


@dataclass(frozen=True)
class CollectiveMetrics:
    """A collectives job's record (`dlperf.distributed.collectives.collective_metrics`): the op, S (bytes), ranks,
    backend and dtype, the bus factor, and the bandwidths at store time (bytes/s; the report recomputes its own
    from the samples). The ranks' own records (`ranks`, `launcher`) stay in the stored dict."""

    op: str | None = None
    size_bytes: int | None = None
    world_size: int | None = None
    backend: str | None = None
    dtype: str | None = None
    bus_factor: float | None = None
    iters_per_sample: int | None = None
    algbw_bytes_per_s: float | None = None
    busbw_bytes_per_s: float | None = None
    #: Whether every rank's output held the expected values (None: not stored, or not a bool).
    checked: bool | None = None

    @classmethod
    def read(cls, raw: object) -> CollectiveMetrics | None:
        """The stored `metrics["collective"]` as a record; None where the case stored none (no dict)."""
        if not isinstance(raw, dict):
            return None
        checked = raw.get("checked")
        return cls(op=_text(raw.get("op")), size_bytes=_int(raw.get("size_bytes")),
                   world_size=_int(raw.get("world_size")), backend=_text(raw.get("backend")),
                   dtype=_text(raw.get("dtype")), bus_factor=_number(raw.get("bus_factor")),
                   iters_per_sample=_int(raw.get("iters_per_sample")),
                   algbw_bytes_per_s=_number(raw.get("algbw_bytes_per_s")),
                   busbw_bytes_per_s=_number(raw.get("busbw_bytes_per_s")),
                   checked=checked if isinstance(checked, bool) else None)
