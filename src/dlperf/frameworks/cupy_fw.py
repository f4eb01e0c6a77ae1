"""CuPy: NumPy's API on an NVIDIA GPU; CUDA-event timing. GPU only."""

from __future__ import annotations

from typing import Any

from dlperf.frameworks.base import Framework, FrameworkInfo


class CupyEventTimer:
    """Times a block between two CUDA events on CuPy's current stream."""

    name = "cuda_event"

    def __init__(self, cp: Any) -> None:
        self._cp = cp
        self._start = cp.cuda.Event()
        self._end = cp.cuda.Event()

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._cp.cuda.get_elapsed_time(self._start, self._end) / 1e3  # ms -> s


def _index(device: str) -> int:
    return int(device.partition(":")[2] or 0)


class CupyFramework(Framework):
    name = "cupy"
    family = "cupy"
    module = "cupy"
    distributions = ("cupy-cuda12x", "cupy-cuda11x", "cupy-cuda13x", "cupy")
    extra = "gpu"

    def devices(self) -> list[str]:
        cp = self.import_module()
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except cp.cuda.runtime.CUDARuntimeError:
            n = 0
        return [f"cuda:{i}" for i in range(n)]

    def sync(self, device: str) -> None:
        self.import_module().cuda.Device(_index(device)).synchronize()

    def device_timer(self, device: str) -> CupyEventTimer | None:
        cp = self.import_module()
        cp.cuda.Device(_index(device)).use()
        return CupyEventTimer(cp)

    def seed(self, n: int) -> None:
        self.import_module().random.seed(n)

    def set_threads(self, n: int) -> None:
        self._threads = n  # host threads do not drive GPU kernels; recorded only

    def peak_memory_bytes(self, device: str) -> tuple[int | None, str]:
        return None, "CuPy's memory pool keeps no peak (only current and total bytes)"

    def is_oom(self, exc: BaseException) -> bool:
        cp = self.import_module()
        return isinstance(exc, (MemoryError, cp.cuda.memory.OutOfMemoryError))

    def info(self) -> FrameworkInfo:
        cp = self.import_module()
        out: FrameworkInfo = {"version": cp.__version__}
        try:
            out["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        except Exception as exc:  # no driver: recorded
            out["cuda_runtime"] = f"unavailable ({type(exc).__name__})"
        return out
