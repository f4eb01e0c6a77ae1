"""Jetson boards: the INA3221 (and INA226) power monitors, sampled and integrated.

Layouts read:
- L4T up to JetPack 4 (TX2, Nano): /sys/bus/i2c/drivers/ina3221x/*/iio:device*/
  with rail_name_<i> and in_power<i>_input (mW);
- JetPack 5 and later (Orin): /sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/ with
  in<i>_label, in<i>_input (mV) and curr<i>_input (mA); power = V x I;
- an INA226 (the sensor study 000 names) as a hwmon device named "ina226" with
  power1_input (uW), taken as the whole board.
The total rail is VDD_IN (TX2, Orin) or POM_5V_IN (Nano); rails labelled NC
(not connected) are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dlperf.meters.base import EnergyReading, Meter, MeterError, integrate_trapezoid

TOTAL_RAILS = ("VDD_IN", "POM_5V_IN")
IIO_ROOT = Path("/sys/bus/i2c/drivers/ina3221x")
HWMON_INA3221_ROOT = Path("/sys/bus/i2c/drivers/ina3221")
HWMON_CLASS = Path("/sys/class/hwmon")

Reader = Callable[[], float]  # returns watts


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def iio_rails(root: Path) -> dict[str, Reader]:
    rails: dict[str, Reader] = {}
    for dev in sorted(root.glob("*/iio:device*")):
        for name_file in sorted(dev.glob("rail_name_*")):
            i = name_file.name.rsplit("_", 1)[1]
            label = name_file.read_text().strip()
            power = dev / f"in_power{i}_input"
            if label != "NC" and power.exists():
                rails[label] = lambda p=power: _read_int(p) / 1e3  # mW -> W
    return rails


def hwmon_ina3221_rails(root: Path) -> dict[str, Reader]:
    rails: dict[str, Reader] = {}
    for mon in sorted(root.glob("*/hwmon/hwmon*")):
        for label_file in sorted(mon.glob("in*_label")):
            i = label_file.name[2:].split("_")[0]
            label = label_file.read_text().strip()
            volt, curr = mon / f"in{i}_input", mon / f"curr{i}_input"
            if label != "NC" and volt.exists() and curr.exists():
                rails[label] = lambda v=volt, c=curr: _read_int(v) * _read_int(c) / 1e6  # mV x mA -> W
    return rails


def ina226_rails(hwmon: Path) -> dict[str, Reader]:
    for mon in sorted(hwmon.glob("hwmon*")):
        try:
            name = (mon / "name").read_text().strip()
        except OSError:
            continue
        if name == "ina226" and (mon / "power1_input").exists():
            return {"INA226": lambda p=mon / "power1_input": _read_int(p) / 1e6}  # uW -> W
    return {}


class JetsonMeter(Meter):
    name = "jetson"
    min_window_s = 1.0  # the INA3221 averages over tens of ms: sample a long enough window

    def __init__(self, iio_root: Path = IIO_ROOT, hwmon_ina3221_root: Path = HWMON_INA3221_ROOT,
                 hwmon_class: Path = HWMON_CLASS, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("poll_interval_s", 0.05)
        super().__init__(**kwargs)
        self.iio_root, self.hwmon_ina3221_root, self.hwmon_class = iio_root, hwmon_ina3221_root, hwmon_class

    def rails(self) -> dict[str, Reader]:
        return iio_rails(self.iio_root) | hwmon_ina3221_rails(self.hwmon_ina3221_root) | ina226_rails(self.hwmon_class)

    def total_rail(self) -> tuple[str, Reader] | None:
        rails = self.rails()
        for name in (*TOTAL_RAILS, "INA226"):
            if name in rails:
                return name, rails[name]
        return None

    def available(self) -> tuple[bool, str]:
        rails = self.rails()
        if not rails:
            return False, "no INA3221/INA226 power rails (not a Jetson board)"
        total = self.total_rail()
        if total is None:
            return False, f"power rails {', '.join(sorted(rails))} but no total rail ({' or '.join(TOTAL_RAILS)})"
        return True, f"rail {total[0]} of {', '.join(sorted(rails))}"

    def start(self) -> None:
        total = self.total_rail()
        if total is None:
            raise MeterError("no total power rail")
        self.rail, self._reader = total
        self._samples: list[tuple[float, float]] = []
        self.poll()
        self._start_polling()

    def poll(self) -> None:
        self._samples.append((self.clock(), self._reader()))

    def stop(self) -> EnergyReading:
        self._stop_polling()
        self.poll()
        if len(self._samples) < 3:
            raise MeterError(f"window too short: {len(self._samples)} power samples of rail {self.rail}")
        window = self._samples[-1][0] - self._samples[0][0]
        return EnergyReading(f"{self.name}:{self.rail}", "polling", integrate_trapezoid(self._samples), window,
                             len(self._samples))
