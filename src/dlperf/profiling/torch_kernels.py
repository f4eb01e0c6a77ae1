"""torch.profiler over a few calls of a step: host operators (self CPU time) and, on CUDA, device kernels."""

from __future__ import annotations

from collections.abc import Callable

from dlperf.profiling.kernels import KernelRow, make_rows


def profile(fn: Callable[[], object], sync: Callable[[], None], device: str, steps: int = 3) -> list[KernelRow]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    sync()
    with tprofile(activities=activities) as prof:
        for _ in range(steps):
            fn()
        sync()
    raw = []
    for evt in prof.key_averages():
        if evt.device_type == DeviceType.CUDA:
            self_us = getattr(evt, "self_device_time_total", None)
            if self_us is None:
                self_us = evt.self_cuda_time_total
            raw.append((evt.key, evt.count, self_us / 1e6, "cuda"))
        else:
            raw.append((evt.key, evt.count, evt.self_cpu_time_total / 1e6, "cpu"))
    return make_rows(raw, steps)
