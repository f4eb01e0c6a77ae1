"""Measure the energy of a step: idle baseline, then a window long enough for the meter, synced at both edges."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypedDict

from dlperf.meters.base import Empty, Meter, MeterError

IDLE_S = 1.0


class EnergyResult(TypedDict, total=False):
    """A case's energy as stored: `measured` False with the `reason`, or the reading (`EnergyRecord`'s keys) with
    the calls in its window and the energy per call."""

    measured: bool
    reason: str
    meter: str
    method: str
    energy_j: float
    window_s: float
    n_samples: int
    idle_power_w: float | None
    mean_power_w: float
    dynamic_energy_j: float | None
    calls: int
    energy_per_call_j: float
    dynamic_energy_per_call_j: float | None


def measure_energy(meter: Meter, fn: Callable[[], object], sync: Callable[[], None], *, per_call_s: float,
                   idle_s: float = IDLE_S, sleep: Callable[[float], None] = time.sleep) -> EnergyResult:
    """Energy per call of `fn`, or the reason there is none. Never a guess.

    1. Idle baseline: the meter over `idle_s` of sleep, just before.
    2. Enough calls for a window of at least the meter's minimum (its update period).
    3. The device is synced before the window opens and before it closes.
    """
    if isinstance(meter, Empty):
        return {"measured": False, "reason": meter.reason}
    try:
        meter.start()
        sleep(idle_s)
        idle = meter.stop()
        idle_power_w = idle.mean_power_w
        calls = max(1, math.ceil(meter.min_window_s / max(per_call_s, 1e-9)))
        sync()
        meter.start()
        for _ in range(calls):
            fn()
        sync()
        reading = meter.stop()
    except MeterError as exc:
        return {"measured": False, "reason": str(exc)}
    reading.idle_power_w = idle_power_w
    out: EnergyResult = {**reading.to_dict(), "measured": True, "calls": calls}
    out["energy_per_call_j"] = reading.energy_j / calls
    dyn = reading.dynamic_energy_j
    out["dynamic_energy_per_call_j"] = dyn / calls if dyn is not None else None
    return out


def edp_js(energy_j: float, time_s: float) -> float:
    """Energy-delay product, J x s."""
    return energy_j * time_s
