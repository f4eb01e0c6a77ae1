"""Which energy meters this machine offers, each with the reason when it does not.

Detection only: reading and integrating energy is the meters' job (issue 4). A
meter counts as available only if its counter can actually be read here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
HWMON = Path("/sys/class/hwmon")
INA3221_IIO = Path("/sys/bus/i2c/drivers/ina3221x")


@dataclass(frozen=True)
class MeterProbe:
    name: str
    available: bool
    detail: str


def probe_rapl(root: Path = POWERCAP) -> MeterProbe:
    zones = sorted(root.glob("intel-rapl:*")) if root.exists() else []
    packages = [z for z in zones if z.name.count(":") == 1]
    if not packages:
        return MeterProbe("rapl", False, f"no RAPL powercap zones under {root} (virtual machine or non-Intel/AMD CPU)")
    try:
        (packages[0] / "energy_uj").read_text()
    except PermissionError:
        return MeterProbe("rapl", False, f"{packages[0]}/energy_uj: permission denied (needs root or a udev rule)")
    except OSError as exc:
        return MeterProbe("rapl", False, f"{packages[0]}/energy_uj unreadable: {exc.strerror}")
    return MeterProbe("rapl", True, f"{len(packages)} package domain(s) under {root}")


def probe_nvml() -> MeterProbe:
    try:
        import pynvml
    except ImportError:
        return MeterProbe("nvml", False, "nvidia-ml-py not installed (pip install -e '.[gpu]'), and no GPU seen")
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return MeterProbe("nvml", False, f"NVML cannot start: {exc}")
    try:
        n = pynvml.nvmlDeviceGetCount()
        return (MeterProbe("nvml", True, f"{n} GPU(s)") if n
                else MeterProbe("nvml", False, "NVML started but sees no GPU"))
    finally:
        pynvml.nvmlShutdown()


def probe_jetson(hwmon: Path = HWMON, iio: Path = INA3221_IIO) -> MeterProbe:
    if iio.exists():
        return MeterProbe("jetson", True, f"INA3221 rails under {iio}")
    for d in sorted(hwmon.glob("hwmon*")) if hwmon.exists() else []:
        try:
            name = (d / "name").read_text().strip()
        except OSError:
            continue
        if name in ("ina3221", "ina226"):
            return MeterProbe("jetson", True, f"{name} rails under {d}")
    return MeterProbe("jetson", False, "no INA3221/INA226 power rails (not a Jetson board)")


def probe_all() -> list[MeterProbe]:
    return [probe_rapl(), probe_nvml(), probe_jetson()]
