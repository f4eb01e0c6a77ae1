"""The timer and its result: `measure()` and `Measurement`. Imports no framework.

Named `timing` so that the function `dlperf.measure` is not shadowed by a subpackage of the same name.
"""

from dlperf.timing.config import TimerConfig
from dlperf.timing.measurement import NOISE_IQR_REL, Measurement
from dlperf.timing.shape import shape_flags
from dlperf.timing.timer import DeviceTimer, estimate_overhead_s, measure
from dlperf.units import format_energy, format_time  # kept importable here; units.py is their home

__all__ = ["NOISE_IQR_REL", "DeviceTimer", "Measurement", "TimerConfig", "estimate_overhead_s", "format_energy",
           "format_time", "measure", "shape_flags"]
