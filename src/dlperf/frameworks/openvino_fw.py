"""OpenVINO: Intel's inference runtime, on the CPU here.

Threads and precision are properties of a *compiled model*: `set_threads` records the count and `compile()`
applies it (INFERENCE_NUM_THREADS, one stream, the latency hint). OpenVINO's CPU plugin runs in bfloat16 by
default on CPUs that have it (AVX512_BF16, AMX): an fp32 case would silently run in bf16, so `compile()` always
states the precision (f32 unless asked otherwise) and the case records it. Intel's Neural Compute Stick 2 (the
MYRIAD plugin, study 004) is not supported by current OpenVINO (dropped after the 2022.3 LTS releases), so it is
not a device here.
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks.base import Framework, UnsupportedError, no_sync

#: dlperf device -> OpenVINO device name.
DEVICES = {"cpu": "CPU"}
#: dlperf precision -> OpenVINO INFERENCE_PRECISION_HINT.
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
NCS2_NOTE = ("Intel's Neural Compute Stick 2 (OpenVINO's MYRIAD plugin) is not supported by current OpenVINO: "
             "the plugin was removed after the 2022.3 LTS releases")


class OpenvinoFramework(Framework):
    name = "openvino"
    family = "openvino"
    module = "openvino"
    distributions = ("openvino",)
    extra = "runtimes"

    def __init__(self) -> None:
        self._threads: int | None = None
        self._core: Any = None

    def core(self) -> Any:
        """The process's openvino.Core (one per adapter)."""
        if self._core is None:
            self._core = self.import_module().Core()
        return self._core

    def devices(self) -> list[str]:
        present = set(self.core().available_devices)
        return [name for name, ov_name in DEVICES.items() if ov_name in present]

    def check_device(self, device: str) -> str:
        if device.lower() in ("myriad", "ncs2"):
            raise UnsupportedError(NCS2_NOTE)
        return super().check_device(device)

    def sync(self, device: str) -> None:
        return None  # a compiled model's synchronous call returns when its outputs are on the host

    def sync_fn(self, device: str):  # type: ignore[override]
        return no_sync

    def seed(self, n: int) -> None:
        import numpy as np

        np.random.seed(n)  # inputs are drawn with NumPy; OpenVINO's inference has no randomness of its own

    def set_threads(self, n: int) -> None:
        self._threads = n

    def threads(self) -> int | None:
        return self._threads

    def compile_config(self, precision: str = "fp32") -> dict[str, Any]:
        """The properties every compiled model gets: precision stated, threads, one stream, the latency hint."""
        if precision not in PRECISION_HINTS:
            raise UnsupportedError(f"openvino: no precision {precision!r} in dlperf ({', '.join(PRECISION_HINTS)})")
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision],
                                  "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
        if self._threads:
            config["INFERENCE_NUM_THREADS"] = self._threads
        return config

    def compile(self, model: str | bytes, device: str, precision: str = "fp32") -> Any:
        """A CompiledModel of `model` (a path or the serialized ONNX bytes) on `device`."""
        core = self.core()
        if device not in DEVICES:
            raise UnsupportedError(f"openvino has no device {device!r} in dlperf (cpu)")
        ov_model = core.read_model(model) if isinstance(model, str) else core.read_model(model, b"")
        return core.compile_model(ov_model, DEVICES[device], self.compile_config(precision))

    def info(self) -> dict[str, Any]:
        ov = self.import_module()
        core = self.core()
        out: dict[str, Any] = {"version": ov.get_version(), "devices": list(core.available_devices),
                               "inference_num_threads": self._threads, "ncs2": NCS2_NOTE}
        try:
            out["cpu_default_precision"] = str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))
        except Exception as exc:  # an old plugin without the property
            out["cpu_default_precision"] = f"unknown ({type(exc).__name__})"
        return out
