"""Energy meters: RAPL, NVML, Jetson rails, and `Empty`, behind one factory; an opt-in TDP estimate."""

from __future__ import annotations

from dlperf.meters.base import Empty, EnergyReading, Meter, MeterError
from dlperf.meters.jetson import JetsonMeter
from dlperf.meters.nvml import NvmlMeter
from dlperf.meters.rapl import RaplMeter


def make_meter(device: str) -> Meter:
    """The meter for a device: NVML (or the Jetson board rail) for CUDA; RAPL (or the Jetson rail) for
    the CPU; else `Empty` carrying every reason, so "not measured" always says why."""
    if device.startswith("cuda"):
        candidates: list[Meter] = [NvmlMeter(int(device.partition(":")[2] or 0)), JetsonMeter()]
    else:
        candidates = [RaplMeter(), JetsonMeter()]
    reasons = []
    for meter in candidates:
        ok, why = meter.available()
        if ok:
            return meter
        reasons.append(f"{meter.name}: {why}")
    return Empty("not measured: " + "; ".join(reasons))


__all__ = ["EnergyReading", "Empty", "JetsonMeter", "Meter", "MeterError", "NvmlMeter", "RaplMeter", "make_meter"]
