"""PyTorch on CPU and CUDA: CUDA-event timing, allocator peaks, thread count."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from dlperf.frameworks.base import Framework, FrameworkInfo, no_sync

if TYPE_CHECKING:
    from dlperf.profiling.kernels import KernelRow


class CudaEventTimer:
    """Times a block between two CUDA events on the current stream (device clock)."""

    name = "cuda_event"

    def __init__(self, torch: Any, device: str) -> None:
        self._torch = torch
        self._device = device
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3  # ms -> s


class TorchFramework(Framework):
    name = "torch"
    family = "torch"
    module = "torch"
    distributions = ("torch",)
    extra = "torch"

    @property
    def install_hint(self) -> str:
        return "pip install torch==2.13.0 (CPU build; plain 'torch' pulls CUDA)"

    def devices(self) -> list[str]:
        torch = self.import_module()
        out = ["cpu"]
        if torch.cuda.is_available():
            out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        return out

    def sync(self, device: str) -> None:
        if device.startswith("cuda"):
            self.import_module().cuda.synchronize(device)

    def sync_fn(self, device: str):  # type: ignore[override]
        if not device.startswith("cuda"):
            return no_sync
        torch = self.import_module()
        return lambda: torch.cuda.synchronize(device)

    def device_timer(self, device: str) -> CudaEventTimer | None:
        if not device.startswith("cuda"):
            return None
        torch = self.import_module()
        torch.cuda.set_device(device)
        return CudaEventTimer(torch, device)

    def seed(self, n: int) -> None:
        torch = self.import_module()
        torch.manual_seed(n)  # seeds CUDA generators too

    def set_threads(self, n: int) -> None:
        self.import_module().set_num_threads(n)

    def threads(self) -> int | None:
        return int(self.import_module().get_num_threads())

    def reset_peak_memory(self, device: str) -> None:
        if device.startswith("cuda"):
            self.import_module().cuda.reset_peak_memory_stats(device)

    def peak_memory_bytes(self, device: str) -> tuple[int | None, str]:
        if device.startswith("cuda"):
            return int(self.import_module().cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated"
        return None, "torch keeps no CPU allocator statistics"

    def kernel_profile(self, fn: Any, sync: Any, device: str, steps: int = 3) -> list[KernelRow]:
        from dlperf.profiling.torch_kernels import profile

        return profile(fn, sync, device, steps)

    def is_oom(self, exc: BaseException) -> bool:
        if isinstance(exc, MemoryError):
            return True
        torch = self.import_module()
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
        text = str(exc)
        return isinstance(exc, RuntimeError) and (
            "out of memory" in text.lower() or "can't allocate memory" in text
        )

    def info(self) -> FrameworkInfo:
        torch = self.import_module()
        out: FrameworkInfo = {"version": torch.__version__, "threads": torch.get_num_threads()}
        config = torch.__config__.show()
        libs: tuple[tuple[str, Literal["blas_info", "lapack_info"]], ...] = (("BLAS_INFO", "blas_info"),
                                                                              ("LAPACK_INFO", "lapack_info"))
        for key, name in libs:
            m = re.search(rf"{key}=([^,\s]+)", config)
            if m:
                out[name] = m.group(1)
        m = re.search(r"oneDNN v([\d.]+)", config) or re.search(r"MKL-DNN v([\d.]+)", config)
        if m:
            out["onednn"] = m.group(1)
        m = re.search(r"Intel\(R\) oneAPI Math Kernel Library Version ([\d.]+)", config)
        if m:
            out["mkl"] = m.group(1)
        out["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            out["cudnn"] = torch.backends.cudnn.version()
        return out
