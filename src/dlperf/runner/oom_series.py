"""Out-of-memory along a workload's memory axis (e.g. cnn's batch): the series a case belongs to, and the
smallest value of each series that ran out of memory, so that the sweep skips the larger ones (also on resume)."""

from __future__ import annotations

from typing import Any

from dlperf.core.result import CaseResult


def memory_series(workload: str, framework: str, device: str, params: dict[str, Any]) -> tuple[Any, str, int] | None:
    """(series, axis, value) when the workload has a memory axis (e.g. cnn's batch), else None."""
    from dlperf.workloads import REGISTRY

    axis = REGISTRY[workload].memory_axis if workload in REGISTRY else None
    if axis is None or not isinstance(params.get(axis), int):
        return None
    rest = tuple(sorted((k, repr(v)) for k, v in params.items() if k != axis))
    return (workload, framework, device, rest), axis, params[axis]


def oom_boundaries(rows: list[CaseResult]) -> dict[Any, int]:
    """Smallest out-of-memory value of the memory axis per series, from stored results (for resume)."""
    out: dict[Any, int] = {}
    for row in rows:
        note_oom(row, out)
    return out


def note_oom(row: CaseResult, oom_at: dict[Any, int]) -> None:
    """Add `row`'s value to `oom_at` where it ran out of memory on a memory axis."""
    found = memory_series(row.workload, row.framework, row.device, row.params or {})
    if row.status == "oom" and found is not None:
        series, _, value = found
        oom_at[series] = min(value, oom_at.get(series, value))
