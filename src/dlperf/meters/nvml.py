"""NVIDIA GPUs through NVML: the total-energy counter (Volta and newer), else power polling.

The counter (nvmlDeviceGetTotalEnergyConsumption, mJ since driver load) is read at
both edges and polled in between to count its updates; a window in which it did
not update at least twice is reported as too short rather than as a number.
Without the counter, power (nvmlDeviceGetPowerUsage, mW) is sampled and
integrated. The caller syncs the device at both edges of the window.
"""

from __future__ import annotations

from typing import Any

from dlperf.meters.base import EnergyReading, Meter, MeterError, integrate_trapezoid


def _load_pynvml() -> Any:
    import pynvml

    return pynvml


class NvmlMeter(Meter):
    name = "nvml"
    min_window_s = 1.0  # the energy counter and power readings update every few tens of ms: keep a margin

    def __init__(self, index: int = 0, nvml: Any = None, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("poll_interval_s", 0.02)
        super().__init__(**kwargs)
        self.index = index
        self._nvml = nvml

    @property
    def nvml(self) -> Any:
        if self._nvml is None:
            self._nvml = _load_pynvml()
        return self._nvml

    def available(self) -> tuple[bool, str]:
        try:
            nv = self.nvml
        except ImportError:
            return False, "nvidia-ml-py is not installed (pip install -e '.[gpu]')"
        try:
            nv.nvmlInit()
            nv.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:
            return False, f"NVML cannot open GPU {self.index}: {exc}"
        return True, f"GPU {self.index} via NVML"

    def _handle(self) -> Any:
        self.nvml.nvmlInit()
        return self.nvml.nvmlDeviceGetHandleByIndex(self.index)

    def start(self) -> None:
        self._h = self._handle()
        try:
            self._first_mj = self.nvml.nvmlDeviceGetTotalEnergyConsumption(self._h)
            self.method = "counter"
            self._counter_values = [self._first_mj]
        except Exception:  # NVMLError_NotSupported before Volta
            self.method = "polling"
            self._samples: list[tuple[float, float]] = []
        self._t0 = self.clock()
        if self.method == "polling":
            self.poll()
        self._start_polling()

    def poll(self) -> None:
        if self.method == "counter":
            value = self.nvml.nvmlDeviceGetTotalEnergyConsumption(self._h)
            if value != self._counter_values[-1]:
                self._counter_values.append(value)
        else:
            self._samples.append((self.clock(), self.nvml.nvmlDeviceGetPowerUsage(self._h) / 1e3))

    def stop(self) -> EnergyReading:
        self._stop_polling()
        self.poll()
        window = self.clock() - self._t0
        if self.method == "counter":
            updates = len(self._counter_values) - 1
            if updates < 2:
                raise MeterError(f"window of {window:.3f} s too short: the NVML energy counter "
                                 f"updated {updates} time(s)")
            energy = (self._counter_values[-1] - self._first_mj) / 1e3
            return EnergyReading(self.name, "counter", energy, window, len(self._counter_values))
        if len(self._samples) < 3:
            raise MeterError(f"window of {window:.3f} s too short: {len(self._samples)} power samples")
        return EnergyReading(self.name, "polling", integrate_trapezoid(self._samples),
                             self._samples[-1][0] - self._samples[0][0], len(self._samples))
