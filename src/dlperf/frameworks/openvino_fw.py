"""OpenVINO: Intel's inference runtime, on the CPU here.

Threads and precision are properties of a *compiled model*: `set_threads` records the count and `compile()`
applies it (INFERENCE_NUM_THREADS, one stream, the latency hint). OpenVINO's CPU plugin runs in bfloat16 by
default on CPUs that have it (AVX512_BF16, AMX): an fp32 case would silently run in bf16, so `compile()` always
states the precision (f32 unless asked otherwise) and the case records it. The hint is only a lower bound the
plugin may compute at: what each node of a compiled model really ran at is read back from its runtime model
(`executed_precisions`), and `check_executed_precision` refuses a model computed below the case's dtype anywhere.

Threads: OpenVINO's CPU plugin pins its inference threads to cores (ENABLE_CPU_PINNING, True by default on Linux;
dlperf leaves it so), where torch and ONNX Runtime leave placement to the OS. `info()` records the setting.

The seed: `seed(n)` records n (`seed_value()`): the runtime builders export the torch model with the weights the
case's seed gives torch (the CNNs; the transformer's weights are seed 0 in every framework).

Intel's Neural Compute Stick 2 (the MYRIAD plugin, study 004) is not supported by current OpenVINO (dropped after
the 2022.3 LTS releases), so it is not a device here.
"""

from __future__ import annotations

from typing import Any, TypedDict

from dlperf.frameworks.base import FrameworkInfo, UnsupportedError
from dlperf.frameworks.runtime_base import InferenceRuntime

#: dlperf device -> OpenVINO device name.
DEVICES = {"cpu": "CPU"}
#: dlperf precision -> OpenVINO INFERENCE_PRECISION_HINT.
PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
#: Performance hints dlperf sets (`ov:latency`, `ov:throughput` variants of the model workload).
PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT")


class CompileConfig(TypedDict, total=False):
    """The properties `compile_model` gets from dlperf (`OpenvinoFramework.compile_config`)."""

    INFERENCE_PRECISION_HINT: str
    PERFORMANCE_HINT: str
    NUM_STREAMS: str
    INFERENCE_NUM_THREADS: int
#: Runtime precisions of executed nodes that keep a case's dtype (its own, or wider).
KEEPS = {"float64": {"f64"}, "float32": {"f32", "f64"}, "float16": {"f16", "f32", "f64"},
         "bfloat16": {"bf16", "f32", "f64"}}
FLOAT_PRECISIONS = {"f64", "f32", "f16", "bf16"}
NCS2_NOTE = ("Intel's Neural Compute Stick 2 (OpenVINO's MYRIAD plugin) is not supported by current OpenVINO: "
             "the plugin was removed after the 2022.3 LTS releases")


class OpenvinoFramework(InferenceRuntime):
    name = "openvino"
    family = "openvino"
    module = "openvino"
    distributions = ("openvino",)
    extra = "runtimes"

    def __init__(self) -> None:
        super().__init__()
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

    def compile_config(self, precision: str = "fp32", hint: str = "LATENCY") -> CompileConfig:
        """The properties every compiled model gets: precision stated, threads, and the performance hint (dlperf's
        default LATENCY with one stream; THROUGHPUT leaves the streams to the plugin)."""
        if precision not in PRECISION_HINTS:
            raise UnsupportedError(f"openvino: no precision {precision!r} in dlperf ({', '.join(PRECISION_HINTS)})")
        if hint not in PERFORMANCE_HINTS:
            raise UnsupportedError(f"openvino: no performance hint {hint!r} in dlperf ({', '.join(PERFORMANCE_HINTS)})")
        config: CompileConfig = {"INFERENCE_PRECISION_HINT": PRECISION_HINTS[precision], "PERFORMANCE_HINT": hint}
        if hint == "LATENCY":
            config["NUM_STREAMS"] = "1"
        if self._threads:
            config["INFERENCE_NUM_THREADS"] = self._threads
        return config

    def compile(self, model: str | bytes, device: str, precision: str = "fp32",
                shape: list[int] | None = None, hint: str = "LATENCY") -> Any:
        """A CompiledModel of `model` (a path or the serialized ONNX bytes) on `device`; `shape` (-1: dynamic)
        fixes the first input's shape before compiling (static shapes: no shape inference per call)."""
        core = self.core()
        if device not in DEVICES:
            raise UnsupportedError(f"openvino has no device {device!r} in dlperf (cpu)")
        ov_model = core.read_model(model) if isinstance(model, str) else core.read_model(model, b"")
        if shape is not None:
            ov_model.reshape({0: self.import_module().PartialShape(shape)})
        return core.compile_model(ov_model, DEVICES[device], self.compile_config(precision, hint))

    def info(self) -> FrameworkInfo:
        ov = self.import_module()
        core = self.core()
        out: FrameworkInfo = {"version": ov.get_version(), "devices": list(core.available_devices),
                               "inference_num_threads": self._threads, "ncs2": NCS2_NOTE}
        try:
            out["cpu_pinning"] = bool(core.get_property("CPU", "ENABLE_CPU_PINNING"))
        except Exception as exc:  # a plugin without the property
            out["cpu_pinning"] = f"unknown ({type(exc).__name__})"
        try:
            out["cpu_default_precision"] = str(core.get_property("CPU", "INFERENCE_PRECISION_HINT"))
        except Exception as exc:  # an old plugin without the property
            out["cpu_default_precision"] = f"unknown ({type(exc).__name__})"
        return out


def executed_precisions(compiled: Any) -> list[tuple[str, str, str]]:
    """(node, layer type, runtime precision) of every executed floating-point node of a compiled model."""
    out = []
    for node in compiled.get_runtime_model().get_ordered_ops():
        rt = node.get_rt_info()
        layer, precision = rt["layerType"].astype(str), rt["runtimePrecision"].astype(str)
        if layer not in ("Input", "Output", "Const") and precision in FLOAT_PRECISIONS:
            out.append((node.get_friendly_name(), layer, precision))
    return out


def check_executed_precision(compiled: Any, dtype: str, version: str) -> None:
    """UnsupportedError when any executed node of `compiled` computes below `dtype` (float64, float32, float16,
    bfloat16), e.g. float64 in f32 or float32 in bf16."""
    lower = [(layer, prec) for _, layer, prec in executed_precisions(compiled) if prec not in KEEPS[dtype]]
    if lower:
        nodes = ", ".join(sorted({f"{layer} in {prec}" for layer, prec in lower}))
        raise UnsupportedError(f"openvino {version}'s CPU plugin computes this {dtype} case in "
                               f"{', '.join(sorted({prec for _, prec in lower}))} (runtime model: {nodes}); "
                               f"refused rather than timed as {dtype}")
