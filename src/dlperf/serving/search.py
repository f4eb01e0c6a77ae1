"""The Server max-rate search: the highest offered rate that LoadGen calls VALID at the case's latency bound.

Each probe is one whole LoadGen Server run at a fixed `server_target_qps` (LoadGen's own FindPeakPerformance
mode is not used: every probe is a run of its own, stored with its verdict). From a start rate the step's speed
suggests, the rate doubles until a probe is INVALID (or halves until one is VALID), then the bracket between the
highest VALID rate and the lowest INVALID rate above it is bisected (geometric mean) until it is within
`RESOLUTION`, or `max_probes` runs were made. Near the boundary a verdict can flip from run to run (Poisson
arrivals, a shared machine): the best rate is the highest VALID probe, the probes show the rest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

#: Rate factor per step while no bracket is known.
GROWTH = 2.0
#: The search stops when the lowest INVALID rate is within this fraction above the highest VALID one.
RESOLUTION = 0.10
#: No probe below this rate (queries/s): a step that slow meets no bound worth a search.
MIN_QPS = 0.01


def probe_row(target_qps: float, loadgen: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """One probe as `server_search["probes"]` stores it."""
    r = loadgen["results"]
    completed = r.get("result_completed_samples_per_sec")
    p99 = r.get("result_99.00_percentile_latency_ns")
    return {"target_qps": target_qps, "validity": loadgen["validity"],
            "completed_qps": float(completed) if isinstance(completed, int | float) else None,
            "latency_p99_s": float(p99) / 1e9 if isinstance(p99, int | float) else None,
            "invalid_reasons": list(loadgen["invalid_reasons"]), "wall_s": wall_s}


def _bracket(probes: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """(the highest VALID rate, the lowest INVALID rate above it; or the lowest INVALID one where none is VALID)."""
    valid = [p["target_qps"] for p in probes if p["validity"] == "VALID"]
    lo = max(valid) if valid else None
    above = [p["target_qps"] for p in probes if p["validity"] != "VALID" and (lo is None or p["target_qps"] > lo)]
    return lo, (min(above) if above else None)


def search_server(run_probe: Callable[[float], dict[str, Any]], *, start_qps: float, max_probes: int,
                  target_latency_s: float, percentile: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics["server_search"], the case's run: the best VALID probe's, else the lowest-rate probe's).

    run_probe(qps) runs LoadGen's Server scenario at that offered rate and returns what it stores for a run
    (a dict with "loadgen"); every probe is kept in the order run.
    """
    if start_qps <= 0 or max_probes < 1:
        raise ValueError(f"a search needs a positive start rate and probes (got {start_qps}, {max_probes})")
    probes: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    rate = start_qps
    stopped = f"probe limit reached ({max_probes} LoadGen runs)"
    while len(probes) < max_probes:
        t0 = time.perf_counter()
        run = run_probe(rate)
        probes.append(probe_row(rate, run["loadgen"], time.perf_counter() - t0))
        runs.append(run)
        lo, hi = _bracket(probes)
        if lo is not None and hi is not None:
            if hi <= lo * (1 + RESOLUTION):
                stopped = (f"bracketed within {RESOLUTION:.0%}: VALID at {lo:.4g} queries/s, INVALID at {hi:.4g}")
                break
            rate = math.sqrt(lo * hi)
        elif lo is not None:
            rate = lo * GROWTH
        else:
            rate = (hi or rate) / GROWTH
            if rate < MIN_QPS:
                stopped = f"no VALID rate down to {rate * GROWTH:.3g} queries/s"
                break
    lo, _ = _bracket(probes)
    if lo is not None:
        valid = [i for i, p in enumerate(probes) if p["validity"] == "VALID"]
        chosen = max(valid, key=lambda i: probes[i]["target_qps"])
    else:
        chosen = min(range(len(probes)), key=lambda i: probes[i]["target_qps"])
    search = {"target_latency_s": target_latency_s, "percentile": percentile, "probes": probes,
              "best_qps": lo, "stopped": stopped}
    return search, runs[chosen]
