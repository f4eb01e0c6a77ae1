"""JAX: jitted steps (`jax`), or the same steps with jit off (`jax-nojit`: each call inside `jax.disable_jit()`,
so every `jax.jit` the builders and models apply runs op by op); completion is awaited with `block_until_ready`
on the step's last output.

JAX has no device-wide sync, so `prepare()` wraps the step to keep its last
output and `sync()` blocks on it: work on a device runs in order, so when the
last output is ready, all of the block is. GPU pre-allocation is switched off
(XLA_PYTHON_CLIENT_PREALLOCATE=false) before JAX starts, so its peak is honest.

`use_compile_cache(folder)` points JAX's persistent compilation cache at a folder with every executable kept
(no minimum compile time, no minimum size: JAX's defaults keep only compiles over 1 s), and `cache_events()`
counts JAX's own monitoring events for it (`CACHE_EVENTS`): what a compile found in the cache or wrote to it.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlperf.frameworks.base import Framework, FrameworkInfo

#: JAX's monitoring events of its persistent compilation cache -> the name dlperf records: a compile that asked the
#: cache, found its executable there, or compiled and wrote it (JAX names a write a "cache miss").
CACHE_EVENTS = {"/jax/compilation_cache/compile_requests_use_cache": "requests",
                "/jax/compilation_cache/cache_hits": "hits",
                "/jax/compilation_cache/cache_misses": "writes"}
_EVENTS: Counter[str] = Counter()  # this process's cache events since `use_compile_cache` first listened
_LISTENING: list[bool] = []


def _count(event: str, **_: Any) -> None:
    if event in CACHE_EVENTS:
        _EVENTS[CACHE_EVENTS[event]] += 1


class JaxFramework(Framework):
    name = "jax"
    family = "jax"
    module = "jax"
    distributions = ("jax",)
    extra = "jax"
    #: False: every call of the prepared step runs inside `jax.disable_jit()` (`jax-nojit`).
    jit = True

    def __init__(self) -> None:
        self._last: Any = None
        self._requested_threads: int | None = None

    def import_module(self) -> Any:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        return super().import_module()

    def jax_device(self, device: str) -> Any:
        jax = self.import_module()
        if device.startswith("cuda"):
            return jax.devices("gpu")[int(device.partition(":")[2] or 0)]
        return jax.devices("cpu")[0]

    def devices(self) -> list[str]:
        jax = self.import_module()
        out = ["cpu"]
        try:
            out += [f"cuda:{i}" for i, _ in enumerate(jax.devices("gpu"))]
        except RuntimeError:
            pass  # no GPU backend in this jaxlib
        return out

    def prepare(self, fn: Callable[[], Any], device: str) -> tuple[Callable[[], Any], Callable[[], None]]:
        def step() -> Any:
            self._last = fn()
            return self._last

        if self.jit:
            return step, lambda: self.sync(device)
        disable_jit = self.import_module().disable_jit  # bound once: the step pays only the context's own cost

        def step_nojit() -> Any:
            with disable_jit():
                self._last = fn()
            return self._last

        return step_nojit, lambda: self.sync(device)

    def mode(self) -> contextlib.AbstractContextManager[Any]:
        """The context a call runs in: `jax.disable_jit()` for `jax-nojit`, nothing for `jax`. Calls outside
        `prepare`'s step (a Step's `predict`) enter it themselves, so no path runs the other mode."""
        return contextlib.nullcontext() if self.jit else self.import_module().disable_jit()

    def use_compile_cache(self, folder: Path | None) -> None:
        """JAX's persistent compilation cache in `folder`, every executable kept (None: no persistent cache).
        The cache object JAX made for an earlier folder of this process is dropped first (JAX makes it once)."""
        jax = self.import_module()
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()
        jax.config.update("jax_compilation_cache_dir", str(folder) if folder is not None else None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # -1: no size floor, none set for us
        if not _LISTENING:  # JAX keeps its listeners for the process: one, registered once
            jax.monitoring.register_event_listener(_count)
            _LISTENING.append(True)

    def cache_events(self) -> dict[str, int]:
        """This process's persistent-cache events so far (`CACHE_EVENTS`), from the first `use_compile_cache`."""
        return {name: _EVENTS[name] for name in CACHE_EVENTS.values()}

    def sync(self, device: str) -> None:
        if self._last is not None:
            self.import_module().block_until_ready(self._last)

    def seed(self, n: int) -> None:
        import numpy as np

        np.random.seed(n)
        self._seed = n
        self.key = self.import_module().random.key(n)

    def set_threads(self, n: int) -> None:
        # XLA's CPU thread pool is sized when JAX starts and cannot be changed here;
        # the request is recorded and `threads()` says the count is not controlled.
        self._requested_threads = n

    def peak_memory_bytes(self, device: str) -> tuple[int | None, str]:
        stats = self.jax_device(device).memory_stats()
        if stats and "peak_bytes_in_use" in stats:
            return int(stats["peak_bytes_in_use"]), "jax Device.memory_stats peak_bytes_in_use (since start)"
        return None, f"JAX reports no allocator statistics for {device}"

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc)

    def info(self) -> FrameworkInfo:
        jax = self.import_module()
        import jaxlib

        return {
            "version": jax.__version__,
            "jaxlib": jaxlib.__version__,
            "backend": jax.default_backend(),
            "mode": "jit" if self.jit else "no-jit (jax.disable_jit)",
            "threads": "not controlled (XLA sizes its CPU pool at start)",
        }


class JaxNojitFramework(JaxFramework):
    name = "jax-nojit"
    family = "jax"
    jit = False
