"""The timer and its result: `measure()` and `Measurement`. Imports no framework."""

from dlperf.measure.measurement import NOISE_IQR_REL, Measurement, format_time
from dlperf.measure.timer import DeviceTimer, estimate_overhead_s, measure

__all__ = ["NOISE_IQR_REL", "DeviceTimer", "Measurement", "estimate_overhead_s", "format_time", "measure"]
