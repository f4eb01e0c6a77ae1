"""ONNX Runtime: an inference runtime. CPU execution provider; the CUDA provider where the installed build has it.

Threads are a property of an ONNX Runtime *session*, not of the process: `set_threads` records the count and
`session()` applies it to every session it opens (intra-op threads; one inter-op thread, sequential execution),
so the count stored with a case is the one its session ran with. Sessions run synchronously: `run()` returns when
its outputs are on the host, so there is nothing to sync.
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks.base import FrameworkInfo, UnsupportedError
from dlperf.frameworks.runtime_base import InferenceRuntime

#: Graph optimisation levels by dlperf's name (`ort:NAME` variants of the model workload); `all` is the default.
OPTIMIZATION_LEVELS = {"none": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
                       "all": "ORT_ENABLE_ALL"}
CPU_PROVIDER = "CPUExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"


class OnnxruntimeFramework(InferenceRuntime):
    name = "onnxruntime"
    family = "onnxruntime"
    module = "onnxruntime"
    distributions = ("onnxruntime", "onnxruntime-gpu")
    extra = "runtimes"

    def devices(self) -> list[str]:
        ort = self.import_module()
        return ["cpu"] + (["cuda:0"] if CUDA_PROVIDER in ort.get_available_providers() else [])

    def providers(self, device: str) -> list[str]:
        """The execution providers a session on `device` is opened with (CUDA first, then CPU for what it lacks)."""
        if device == "cpu":
            return [CPU_PROVIDER]
        if device.startswith("cuda"):
            return [CUDA_PROVIDER, CPU_PROVIDER]
        raise UnsupportedError(f"onnxruntime has no device {device!r} in dlperf (cpu, cuda:0)")

    def session_options(self, optimization: str = "all") -> Any:
        """SessionOptions with this adapter's threads (intra-op `threads`, one inter-op thread, sequential) and
        the graph optimisation level `optimization` (OPTIMIZATION_LEVELS)."""
        ort = self.import_module()
        opts = ort.SessionOptions()
        if self._threads:
            opts.intra_op_num_threads = self._threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[optimization])
        return opts

    def session(self, model: str | bytes, device: str, optimization: str = "all") -> Any:
        """An InferenceSession for `model` (a path or the serialized ONNX bytes) on `device`, with this
        adapter's threads and graph optimisation level; UnsupportedError when the device's provider is absent
        from this build."""
        ort = self.import_module()
        providers = self.providers(device)
        missing = [p for p in providers if p not in ort.get_available_providers()]
        if missing:
            raise UnsupportedError(f"this onnxruntime build has no {missing[0]} "
                                   f"(it has: {', '.join(ort.get_available_providers())})")
        sess = ort.InferenceSession(model, sess_options=self.session_options(optimization), providers=providers)
        if providers[0] not in sess.get_providers():
            raise UnsupportedError(f"onnxruntime could not open {providers[0]} here "
                                   f"(the session runs on {', '.join(sess.get_providers())})")
        return sess

    def info(self) -> FrameworkInfo:
        ort = self.import_module()
        return {"version": ort.__version__, "providers": list(ort.get_available_providers()),
                "device": ort.get_device(), "intra_op_threads": self._threads}
