"""The Server max-rate search: the highest offered rate that LoadGen calls VALID at the case's latency bound.

Each probe is one whole LoadGen Server run at a fixed `server_target_qps` (LoadGen's own FindPeakPerformance
mode is not used: every probe is a run of its own, stored with its verdict). From a start rate the step's speed
suggests, the rate doubles until a probe is INVALID (or halves until one is VALID), then the bracket between the
highest VALID rate and the lowest INVALID rate above it is bisected (geometric mean) until it is within
`RESOLUTION`, or the probe limit or the time budget is reached.

Verdicts are not monotonic in the rate on a shared machine (a few late queries decide early stopping), so: a
probe INVALID by early stopping alone, with its p99 under the bound, is run once more at the same rate before it
counts as INVALID; a rate counts by its latest probe; the chosen rate is run once more without the probes'
outstanding-query cap (the confirming run, the case's own run, stored as a probe too), and where it comes out
INVALID the next lower VALID rate is tried. `stopped` says "non-monotonic" when verdicts flipped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from dlperf.serving.records import ProbeRow, ServedRun, ServerSearchRecord

#: Rate factor per step while no bracket is known.
GROWTH = 2.0
#: The search stops when the lowest INVALID rate is within this fraction above the highest VALID one.
RESOLUTION = 0.10
#: LoadGen's reason for early stopping.
EARLY_STOPPING = "early stopping not met"

#: run_probe(qps, confirm) -> {"loadgen": ..., "probe": {...extra fields of the probe's record}, ...}
RunProbe = Callable[[float, bool], ServedRun]


def probe_row(target_qps: float, run: ServedRun, wall_s: float, role: str) -> ProbeRow:
    """One probe as `server_search["probes"]` stores it."""
    loadgen = run["loadgen"]
    r = loadgen["results"]
    completed = r.get("result_completed_samples_per_sec")
    p99 = r.get("result_99.00_percentile_latency_ns")
    late = r.get("result_overlatency_query_count")
    row: ProbeRow = {"target_qps": target_qps, "validity": loadgen["validity"],
                     "completed_qps": float(completed) if isinstance(completed, int | float) else None,
                     "latency_p99_s": float(p99) / 1e9 if isinstance(p99, int | float) else None,
                     "invalid_reasons": list(loadgen["invalid_reasons"]), "wall_s": wall_s, "role": role,
                     "late_queries": int(late) if isinstance(late, int | float) else None,
                     "query_count": r.get("result_query_count"), "activity": loadgen.get("activity")}
    row.update(run.get("probe", {}))  # the probe's settings after its figures, as `|` laid them
    return row


def _latest(probes: list[ProbeRow]) -> dict[float, str]:
    """Each rate's verdict: its latest probe's."""
    return {p["target_qps"]: p["validity"] for p in probes}


def _bracket(probes: list[ProbeRow]) -> tuple[float | None, float | None]:
    """(the highest VALID rate, the lowest INVALID rate above it; or the lowest INVALID one where none is VALID),
    each rate by its latest probe."""
    latest = _latest(probes)
    valid = [q for q, v in latest.items() if v == "VALID"]
    lo = max(valid) if valid else None
    above = [q for q, v in latest.items() if v != "VALID" and (lo is None or q > lo)]
    return lo, (min(above) if above else None)


def non_monotonic(probes: list[ProbeRow]) -> bool:
    """Verdicts flipped: one rate both VALID and INVALID, or an INVALID rate below a VALID one."""
    by_rate: dict[float, set[str]] = {}
    for p in probes:
        by_rate.setdefault(p["target_qps"], set()).add(p["validity"])
    if any(len(v) > 1 for v in by_rate.values()):
        return True
    valid = [q for q, v in by_rate.items() if "VALID" in v]
    return bool(valid) and any("VALID" not in v and q < max(valid) for q, v in by_rate.items())


def _early_stopping_only(p: ProbeRow, target_latency_s: float) -> bool:
    """INVALID by early stopping alone, its p99 under the bound (the perf constraint met)."""
    p99 = p["latency_p99_s"]
    return (p["validity"] != "VALID" and p["invalid_reasons"] == [EARLY_STOPPING] and p99 is not None
            and p99 <= target_latency_s)


def search_server(run_probe: RunProbe, *, start_qps: float, max_probes: int, target_latency_s: float,
                  percentile: float, planned_s: Callable[[float, bool], float] | None = None,
                  time_left_s: Callable[[], float] | None = None) -> tuple[ServerSearchRecord, ServedRun | None]:
    """(metrics["server_search"], the case's run: the confirmed rate's, else the best VALID probe's, else the
    lowest-rate probe's; None where no probe could run).

    run_probe(qps, confirm) runs LoadGen's Server scenario at that offered rate (confirm: the chosen rate's
    confirming run, without the probes' cap); planned_s(qps, confirm) is its planned wall time and time_left_s()
    what is left before the deadline (none given: no time limit). At most `max_probes` LoadGen runs, one of them
    kept for the confirmation; every run is kept in the order run.
    """
    if start_qps <= 0 or max_probes < 1:
        raise ValueError(f"a search needs a positive start rate and probes (got {start_qps}, {max_probes})")
    probes: list[ProbeRow] = []
    runs: list[ServedRun] = []

    def fits(qps: float, confirm: bool) -> bool:
        return planned_s is None or time_left_s is None or planned_s(qps, confirm) <= time_left_s()

    def budget_text(qps: float, confirm: bool) -> str:
        left = time_left_s() if time_left_s else math.inf
        need = planned_s(qps, confirm) if planned_s else 0.0
        return (f"time budget: a run at {qps:.4g} queries/s needs ~{need:.0f} s, {max(left, 0):.0f} s left before "
                f"the worker's time-out (raise the study's timeout_s for more)")

    def probe(qps: float, role: str) -> ProbeRow:
        t0 = time.perf_counter()
        run = run_probe(qps, role == "confirm")
        probes.append(probe_row(qps, run, time.perf_counter() - t0, role))
        runs.append(run)
        return probes[-1]

    search_runs = max_probes - 1 if max_probes > 1 else 1  # one kept for the confirming run
    rate = start_qps
    stopped = ""
    while True:
        if len(probes) >= search_runs:
            lo, hi = _bracket(probes)
            stopped = f"probe limit reached ({max_probes} LoadGen runs)"
            if lo is not None and hi is None:
                stopped += f": every rate up to {lo:.4g} queries/s VALID, still doubling: best_qps is a lower bound"
            break
        if not fits(rate, False):
            stopped = budget_text(rate, False)
            break
        p = probe(rate, "search")
        if (_early_stopping_only(p, target_latency_s) and len(probes) < search_runs and fits(rate, False)):
            probe(rate, "re-probe")  # a few late queries on a shared machine: once more before it counts
        lo, hi = _bracket(probes)
        if lo is not None and hi is not None:
            if hi <= lo * (1 + RESOLUTION):
                stopped = f"bracketed within {RESOLUTION:.0%}: VALID at {lo:.4g} queries/s, INVALID at {hi:.4g}"
                break
            rate = math.sqrt(lo * hi)
        elif lo is not None:
            rate = lo * GROWTH
        else:
            rate = (hi or rate) / GROWTH

    confirmed: float | None = None
    lo, _ = _bracket(probes)
    while lo is not None and max_probes > 1:
        if len(probes) >= max_probes:
            stopped += f"; {lo:.4g} queries/s not confirmed (probe limit)"
            break
        if not fits(lo, True):
            stopped += f"; {lo:.4g} queries/s not confirmed ({budget_text(lo, True)})"
            break
        if probe(lo, "confirm")["validity"] == "VALID":
            confirmed = lo
            stopped += f"; confirmed at {lo:.4g} queries/s by a run without the probes' cap"
            break
        lo, _ = _bracket(probes)  # it flipped: the next lower VALID rate, if any
    if non_monotonic(probes):
        stopped += "; non-monotonic: verdicts flipped between runs (noise near the boundary)"
    best, _ = _bracket(probes)
    if runs:
        if confirmed is not None:
            chosen = max(i for i, p in enumerate(probes) if p["target_qps"] == confirmed and p["role"] == "confirm")
        elif best is not None:
            chosen = max(i for i, p in enumerate(probes) if p["target_qps"] == best and p["validity"] == "VALID")
        else:
            chosen = min(range(len(probes)), key=lambda i: probes[i]["target_qps"])
    search: ServerSearchRecord = {"target_latency_s": target_latency_s, "percentile": percentile, "probes": probes,
              "best_qps": best, "confirmed": confirmed is not None, "stopped": stopped.lstrip("; ")}
    return search, runs[chosen] if runs else None
