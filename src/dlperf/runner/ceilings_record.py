"""The ceilings a run stores (`runs.derived["ceilings"]`), typed by their keys: what `runner.ceilings` measures in
its worker and what the worker hands back (`runner.worker_result.WorkerResult.ceilings`). Apart from
`runner.ceilings` so that the worker's result can name them without importing the code that starts a worker.

Rates are bytes/s or FLOP/s: the best sample's (`*_per_s`) with the median's beside it and the IQR/median.
"""

from __future__ import annotations

from typing import Any, NotRequired, Required, TypedDict


class FigureTiming(TypedDict):
    """The timer's settings for one figure (`timing.measure`'s keywords)."""

    warmup: int
    min_run_time_s: float
    max_time_s: float
    min_samples: int


class StreamFigure(TypedDict):
    """One STREAM kernel at one working set on one framework."""

    kernel: str
    working_set_bytes: int
    framework: str
    bytes_per_s: float
    bytes_per_s_median: float
    iqr_rel: float
    n_samples: int
    block_size: int


class GemmFigure(TypedDict):
    """The n x n float32 GEMM on one framework; the best of them keeps every framework's under `figures`."""

    n: int
    framework: str
    flops_per_s: float
    flops_per_s_median: float
    iqr_rel: float
    n_samples: int
    block_size: int
    figures: NotRequired[list[GemmFigure]]


class CurvePoint(TypedDict):
    """The bandwidth curve at one working set: the best figure there (its kernel and framework) and every figure."""

    working_set_bytes: int
    bytes_per_s: float
    bytes_per_s_median: float
    spread_rel: float
    kernel: str
    framework: str
    figures: list[StreamFigure]


class PlateauRecord(TypedDict):
    """A memory level as the curve shows it (`hardware.bwcurve.Plateau`, as a dict)."""

    name: str
    start_bytes: int
    end_bytes: int
    bytes_per_s: float
    spread_rel: float
    n_points: int


class CurveRecord(TypedDict):
    """The curve's points and the plateaus found in it."""

    points: list[CurvePoint]
    plateaus: list[PlateauRecord]


class CeilingLevel(TypedDict):
    """A memory level's ceiling as the roofline reads it: its capacity (None for the last, DRAM), where its plateau
    starts and ends, its bandwidth, spread and how many points it spans."""

    name: str
    capacity_bytes: int | None
    start_bytes: int
    end_bytes: int
    bytes_per_s: float
    iqr_rel: float
    n_points: int


class DeviceCeilings(TypedDict):
    """One device's ceilings (`runner.ceilings.device_ceilings`); a figure that could not be measured is absent,
    with its reason under `errors`."""

    device: str
    threads: int
    #: the caches the sweep's sizes come from (`hardware.caches.CacheInfo.to_dict`)
    caches: dict[str, Any]
    frameworks: list[str]
    levels: list[CeilingLevel]
    curve: CurveRecord
    gemm: GemmFigure | None
    errors: dict[str, str]
    #: how a figure is chosen, in words
    timing: str
    wall_s: float


class Ceilings(TypedDict, total=False):
    """A run's ceilings, per device (`runner.ceilings.measure_run_ceilings`): when and how they were measured and
    the worker's wall time, or `error` with the reason and no device."""

    version: Required[int]
    measured_at: str
    threads: int | None
    quick: bool
    devices: Required[dict[str, DeviceCeilings]]
    wall_s: float
    #: the machine while they were measured (`meters.activity`: other processes' CPU use, steal), as a case's
    activity: Any
    error: str
