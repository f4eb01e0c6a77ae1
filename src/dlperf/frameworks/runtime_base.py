"""What the inference runtimes' adapters share: settings that belong to a session, not to the process.

ONNX Runtime and OpenVINO take their thread count when a session (a compiled model) is opened, not from a
process-wide setting: the adapter records the count (and the seed, whose torch weights a builder exports) and
applies it to every session it opens, so what a case stores is what its session ran with. Their synchronous
calls return when the outputs are ready, so there is nothing to sync on the host.
"""

from __future__ import annotations

from dlperf.frameworks.base import Framework, no_sync

#: Words a runtime's failed allocation leaves in the error a run raises.
RUNTIME_OOM_MARKERS = ("Failed to allocate memory", "std::bad_alloc")


class InferenceRuntime(Framework):
    """Base of the runtime adapters: threads and seed recorded for the sessions they open; no sync."""

    def __init__(self) -> None:
        self._threads: int | None = None

    def is_oom(self, exc: BaseException) -> bool:
        """MemoryError, or the runtime's C++ allocation failing inside a run: onnxruntime's arena refusing a
        buffer ("Failed to allocate memory for requested buffer of size N", its CUDA provider's too) or
        `std::bad_alloc`, both raised as RuntimeError."""
        return isinstance(exc, MemoryError) or any(m in str(exc) for m in RUNTIME_OOM_MARKERS)

    def sync(self, device: str) -> None:
        return None  # a session's synchronous call returns when its outputs are ready

    def sync_fn(self, device: str):  # type: ignore[override]
        return no_sync

    def seed(self, n: int) -> None:
        import numpy as np

        np.random.seed(n)  # inputs are drawn with NumPy; the runtimes' inference has no randomness of its own
        self._seed = n

    def set_threads(self, n: int) -> None:
        self._threads = n  # applied by each session the adapter opens

    def threads(self) -> int | None:
        return self._threads
