"""Derived metrics of a case: statistics of the measurement plus what the cost model implies."""

from __future__ import annotations

from dlperf.core.result import Rates, derive_rates
from dlperf.timing import Measurement
from dlperf.workloads import Cost


def derive_metrics(m: Measurement, cost: Cost) -> Rates:
    """Per-call statistics and, from the median, throughput, FLOP/s and bytes/s (see `derive_rates`,
    which `CaseResult.from_row` also uses to recompute them from the stored samples)."""
    return derive_rates(m.summary(), cost.samples, cost.flops, cost.bytes_moved)

