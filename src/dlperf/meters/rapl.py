"""RAPL through Linux powercap: package energy counters, summed over packages, wraparound handled.

Only top-level package zones (intel-rapl:N) are summed: their sub-zones (core,
uncore, dram: intel-rapl:N:M) are parts of the package and would be counted
twice. The counter (energy_uj) wraps at max_energy_range_uj; the meter folds in
a reading every poll so that any number of wraps in a window is seen, as long
as the poll interval is shorter than the wrap period (minutes at full power).
"""

from __future__ import annotations

import re
from pathlib import Path

from dlperf.meters.base import EnergyReading, Meter, MeterError

POWERCAP = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"^intel-rapl:\d+$")


class RaplMeter(Meter):
    name = "rapl"
    min_window_s = 0.05  # the counter updates about every millisecond

    def __init__(self, root: Path = POWERCAP, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("poll_interval_s", 1.0)
        super().__init__(**kwargs)
        self.root = root

    def packages(self) -> list[Path]:
        return sorted(p for p in self.root.glob("intel-rapl:*") if _PACKAGE.match(p.name)) if self.root.exists() else []

    def available(self) -> tuple[bool, str]:
        pkgs = self.packages()
        if not pkgs:
            return False, f"no RAPL package zones under {self.root} (a virtual machine, or no RAPL support)"
        try:
            self._read()
        except PermissionError as exc:
            return False, f"{exc.filename}: permission denied (reading RAPL needs root or a udev rule)"
        except OSError as exc:
            return False, f"RAPL unreadable: {exc}"
        return True, f"{len(pkgs)} package zone(s) under {self.root}"

    def _read(self) -> dict[str, tuple[int, int]]:
        out = {}
        for pkg in self.packages():
            energy = int((pkg / "energy_uj").read_text())
            max_range = int((pkg / "max_energy_range_uj").read_text())
            out[pkg.name] = (energy, max_range)
        return out

    def start(self) -> None:
        try:
            self._last = {k: v[0] for k, v in self._read().items()}
        except PermissionError as exc:
            raise MeterError(f"{exc.filename}: permission denied") from None
        self._total_uj = 0
        self._samples = 1
        self._t0 = self.clock()
        self._start_polling()

    def poll(self) -> None:
        now = self._read()
        for zone, (energy, max_range) in now.items():
            last = self._last[zone]
            delta = energy - last if energy >= last else energy + max_range - last  # wrapped
            self._total_uj += delta
            self._last[zone] = energy
        self._samples += 1

    def stop(self) -> EnergyReading:
        self._stop_polling()
        self.poll()
        window = self.clock() - self._t0
        return EnergyReading(self.name, "counter", self._total_uj / 1e6, window, self._samples)
