"""A served case's LoadGen verdict as one line of text: what `dlperf serve` ends with and what the progress line
of a serve case says (the serve workload's view, `report.views`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlperf.core.status import SHORTENED
from dlperf.units import NOT_MEASURED, format_time

if TYPE_CHECKING:
    from dlperf.core.result import Metrics

#: Said of a search's best rate that no run without the probes' outstanding-query cap has confirmed.
UNCONFIRMED = " (not confirmed by a run without the cap)"


def verdict_text(m: Metrics) -> str:
    """LoadGen's verdict from a case's metrics: `VALID, p90 latency: 412 us`, `INVALID (min duration not met) ...`,
    with the Server search's best rate and the shortened label where they apply; a search that stopped before any
    probe says why."""
    lg = m.loadgen_summary()
    search = m.server_search_summary()
    if lg is None:
        if search is not None and not search.probes:  # the search stopped before any LoadGen run
            return f"search: no rate tried ({search.stopped or 'no reason stored'})"
        return "no LoadGen result stored"
    text = lg.validity or "no verdict"
    if lg.invalid_reasons:
        text += f" ({'; '.join(lg.invalid_reasons)})"
    metric = lg.metric
    if metric is not None:
        name, unit = metric.name or "metric", metric.unit
        shown = unit if unit and unit != "s" and unit not in name else None  # the unit once, not twice
        value = format_metric(metric.value, "s" if unit == "s" else shown)
        text += f", {name}: {value}"
    if search is not None:
        n, best = len(search.probes), search.best_qps
        stopped = "no reason stored" if search.stopped is None else search.stopped
        text += (f"; search: no valid rate in {n} probes ({stopped})"
                 if best is None else f"; search: highest valid rate {format_rate(best)} queries/s of {n} "
                                      f"probes{'' if search.confirmed else UNCONFIRMED}")
    if lg.shortened:
        text += f" ({SHORTENED})"
    return text


def format_metric(value: float | None, unit: str | None) -> str:
    """A LoadGen metric with its unit: a latency in s as a time, a rate with its unit."""
    if value is None:
        return NOT_MEASURED
    if unit == "s":
        return format_time(value)
    return f"{format_rate(value)} {unit or ''}".rstrip()


def format_rate(value: float) -> str:
    """A rate for a reader: whole numbers with thousands separators from 100 up (26,040), 3 digits below (8.12)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
