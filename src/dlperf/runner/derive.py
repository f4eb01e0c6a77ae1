"""Derived metrics of a case: statistics of the measurement plus what the cost model implies."""

from __future__ import annotations

from typing import Any

from dlperf.timing import Measurement
from dlperf.workloads import Cost


def derive_metrics(m: Measurement, cost: Cost) -> dict[str, Any]:
    """Per-call statistics and, from the median, throughput, FLOP/s and bytes/s.

    Rates come from the median time per call; their spread is the measurement's
    IQR/median (stored beside them as `iqr_rel`). A quantity the cost model does
    not define stays None.
    """
    out = m.summary()
    median = out["median_s"]
    samples = cost.samples
    out["samples_per_call"] = samples
    out["time_per_sample_s"] = median / samples if samples else None
    out["samples_per_s"] = samples / median if median > 0 else None
    out["flops_per_call"] = cost.flops
    out["flops_per_s"] = cost.flops / median if cost.flops is not None and median > 0 else None
    out["bytes_per_call"] = cost.bytes_moved
    out["bytes_per_s"] = cost.bytes_moved / median if cost.bytes_moved is not None and median > 0 else None
    out["arithmetic_intensity"] = (
        cost.flops / cost.bytes_moved if cost.flops is not None and cost.bytes_moved else None
    )
    return out


def peak_memory(r: dict[str, Any]) -> tuple[int | None, str]:
    """(bytes, what) of a result: allocator peak on a GPU, worker RSS on a CPU."""
    m = r.get("metrics") or {}
    if r["device"] != "cpu" and m.get("peak_device_mem_bytes"):
        return int(m["peak_device_mem_bytes"]), "device allocator peak"
    rss = m.get("peak_rss_bytes")
    return (int(rss), "worker peak RSS") if rss else (None, "not measured")
