"""Caffe (pycaffe), where it imports. It cannot be installed on current Python from PyPI;
`doctor` reports it absent, and its cases are recorded as unsupported."""

from __future__ import annotations

from dlperf.frameworks.base import Framework, FrameworkInfo, no_sync


class CaffeFramework(Framework):
    name = "caffe"
    family = "caffe"
    module = "caffe"
    distributions = ("caffe",)

    @property
    def install_hint(self) -> str:
        return "build BVLC Caffe with its Python bindings (pycaffe) and put it on PYTHONPATH; not on PyPI"

    def devices(self) -> list[str]:
        caffe = self.import_module()
        try:
            n = int(caffe.get_device_count()) if hasattr(caffe, "get_device_count") else 0
        except Exception:
            n = 0
        return ["cpu"] + [f"cuda:{i}" for i in range(n)]

    def sync(self, device: str) -> None:
        return None  # Solver.step returns after the iteration's work (Caffe synchronises its own streams)

    def sync_fn(self, device: str):  # type: ignore[override]
        return no_sync

    def use_device(self, device: str) -> None:
        caffe = self.import_module()
        if device == "cpu":
            caffe.set_mode_cpu()
        else:
            caffe.set_device(int(device.partition(":")[2] or 0))
            caffe.set_mode_gpu()

    def info(self) -> FrameworkInfo:
        caffe = self.import_module()
        return {"version": getattr(caffe, "__version__", None) or self.version}
