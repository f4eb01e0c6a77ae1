"""NaN and infinity in a store's JSON: SQLite holds them (Python's `json` spells them NaN, Infinity), PostgreSQL's
JSON cannot. A result's metrics can hold one (a meter's mean power over a window of 0 s), whether a worker stores it
or a bundle brings it: on PostgreSQL each becomes null, and `metrics["nonfinite"]` keeps what it was and why
(`finite_metrics`, applied by `Store.add_result` and the bundle importer)."""

from __future__ import annotations

import math
from typing import Any

#: Why a result's metrics hold null where a NaN or an infinity was measured (`metrics["nonfinite"]["reason"]`).
NONFINITE_REASON = ("PostgreSQL's JSON cannot hold NaN or infinity: stored as null in this PostgreSQL store (a "
                    "SQLite store holds them); `values` gives each one, by its path in the metrics, as JSON spells it")


def spelled(x: float) -> str:
    """A non-finite float as JSON (and Python's `json`) spells it."""
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def nonfinite(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every NaN or infinity in a JSON value, by its path (`energy.mean_power_w`, `odd[1]`)."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(path, value)]
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in nonfinite(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in nonfinite(v, f"{path}[{i}]")]
    return []


def nulled(value: Any) -> Any:
    """A copy of a JSON value with every NaN and infinity replaced by null (keys in their order)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: nulled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nulled(v) for v in value]
    return value


def finite_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """`metrics` with each NaN and infinity as null, and `nonfinite` saying where, what it was and why."""
    values = {path: spelled(x) for path, x in nonfinite(metrics)}
    return {**nulled(metrics), "nonfinite": {"values": values, "reason": NONFINITE_REASON}}
