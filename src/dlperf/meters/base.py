"""Energy meters: one small class per source, an `Empty` stand-in, and the reading they give.

A meter either measures or says why it cannot; it never returns a made-up number.
Units: joules (energy_j), watts (power_w), seconds (window_s).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

Clock = Callable[[], float]


class EnergyRecord(TypedDict):
    """An `EnergyReading` as stored (`to_dict`): its fields, then its mean and dynamic figures."""

    meter: str
    method: str
    energy_j: float
    window_s: float
    n_samples: int
    idle_power_w: float | None
    mean_power_w: float
    dynamic_energy_j: float | None


@dataclass
class EnergyReading:
    """Energy over one window, from one meter."""

    meter: str
    method: str  # "counter" (the hardware integrates) or "polling" (we integrate sampled power)
    energy_j: float
    window_s: float
    n_samples: int
    idle_power_w: float | None = None

    @property
    def mean_power_w(self) -> float:
        return self.energy_j / self.window_s if self.window_s > 0 else float("nan")

    @property
    def dynamic_energy_j(self) -> float | None:
        """Energy above the idle baseline measured just before the window."""
        if self.idle_power_w is None:
            return None
        return self.energy_j - self.idle_power_w * self.window_s

    def to_dict(self) -> EnergyRecord:
        return {"meter": self.meter, "method": self.method, "energy_j": self.energy_j, "window_s": self.window_s,
                "n_samples": self.n_samples, "idle_power_w": self.idle_power_w, "mean_power_w": self.mean_power_w,
                "dynamic_energy_j": self.dynamic_energy_j}


class MeterError(RuntimeError):
    """The meter could not produce a reading for this window (the reason is stored)."""


class Meter:
    """Base meter: `available()` says whether and why; `start()`/`stop()` bracket a window.

    Polling meters call `poll()` from a background thread every `poll_interval_s`;
    tests pass `poll_interval_s=None` and call `poll()` themselves with a fake clock.
    """

    name = "meter"
    #: Shortest window this meter can measure honestly (its update period, with margin).
    min_window_s = 0.5

    def __init__(self, *, clock: Clock = time.monotonic, poll_interval_s: float | None = 0.05) -> None:
        self.clock = clock
        self.poll_interval_s = poll_interval_s
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def available(self) -> tuple[bool, str]:
        raise NotImplementedError(f"{type(self).__name__} does not implement available()")

    def start(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement start()")

    def stop(self) -> EnergyReading:
        raise NotImplementedError(f"{type(self).__name__} does not implement stop()")

    def poll(self) -> None:
        """Take one sample (polling meters) or fold in a counter reading (wrap detection)."""
        return None

    # -- background polling ---------------------------------------------
    def _start_polling(self) -> None:
        if self.poll_interval_s is None:
            return
        self._stop.clear()
        interval = self.poll_interval_s

        def loop() -> None:
            while not self._stop.wait(interval):
                self.poll()

        self._thread = threading.Thread(target=loop, name=f"dlperf-{self.name}-poll", daemon=True)
        self._thread.start()

    def _stop_polling(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None


class Empty(Meter):
    """Measures nothing and says why: the field stays empty with this reason."""

    name = "none"

    def __init__(self, reason: str) -> None:
        super().__init__(poll_interval_s=None)
        self.reason = reason

    def available(self) -> tuple[bool, str]:
        return False, self.reason

    def start(self) -> None:
        raise MeterError(self.reason)

    def stop(self) -> EnergyReading:
        raise MeterError(self.reason)


def integrate_trapezoid(samples: list[tuple[float, float]]) -> float:
    """Energy (J) from (time_s, power_w) samples by the trapezoid rule."""
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(samples))
