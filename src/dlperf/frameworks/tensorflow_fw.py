"""TensorFlow: `tensorflow` runs steps as `tf.function` graphs, `tensorflow-xla` as graphs XLA compiles
(`tf.function(jit_compile=True)`), `tensorflow-eager` op by op. The builders ask `compile_step` for the mode.

GPU memory growth is switched on before TensorFlow touches a GPU, so that its
allocator does not grab all memory up front and its peak is an honest figure.

`tensorflow-xla` compiles with XLA's persistent cache in a new folder of its process (`compile_cache`): XLA saves
each executable it compiles there and loads it from there in a later process, so a second fresh process on that
folder measures a warm compile. TensorFlow reads the folder from TF_XLA_FLAGS once, when it first lists its devices
(set later, it is ignored: seen with TensorFlow 2.21), so the adapter sets the flag for that moment only and puts
TF_XLA_FLAGS back: the workers this process starts do not inherit its folder. A TF_XLA_FLAGS that already names a
folder (a warm compile's process) is used as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.frameworks.base import Framework, FrameworkInfo, no_sync
from dlperf.frameworks.compile_cache import cache_folder

if TYPE_CHECKING:
    from dlperf.profiling.kernels import KernelRow


#: TensorFlow's flag (in TF_XLA_FLAGS) naming the folder XLA saves its executables to and loads them from.
PERSISTENT_FLAG = "--tf_xla_persistent_cache_directory"
#: This process's XLA cache folder (None: none) and how it was chosen or why there is none, once decided.
_XLA_CACHE: list[tuple[Path | None, str]] = []


def persistent_dir(flags: str) -> str | None:
    """The folder `flags` (TF_XLA_FLAGS's value) names for XLA's persistent cache (None: none)."""
    for part in flags.split():
        name, _, value = part.partition("=")
        if name == PERSISTENT_FLAG and value:
            return value
    return None


def tf_device(device: str) -> str:
    """dlperf's 'cpu' / 'cuda:N' as TensorFlow's '/CPU:0' / '/GPU:N'."""
    if device.startswith("cuda"):
        return f"/GPU:{device.partition(':')[2] or 0}"
    return "/CPU:0"


def compile_step(fw: Framework, fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """`fn` as `fw`'s mode runs it: a `tf.function` graph (`tensorflow`), one XLA compiles whole
    (`tensorflow-xla`: jit_compile=True, so an op XLA cannot compile is an error, never a silent fallback),
    or `fn` itself (`tensorflow-eager`). `kwargs` go to tf.function (an input_signature)."""
    if not getattr(fw, "graph", True):
        return fn
    tf = fw.import_module()
    if getattr(fw, "jit_compile", False):
        return tf.function(fn, jit_compile=True, **kwargs)
    return tf.function(fn, **kwargs)


class TensorflowFramework(Framework):
    name = "tensorflow"
    family = "tensorflow"
    module = "tensorflow"
    distributions = ("tensorflow-cpu", "tensorflow", "tensorflow-gpu")
    extra = "tensorflow"
    #: True: steps are wrapped in tf.function (graph); False: eager.
    graph = True
    #: True: the graphs are compiled by XLA (tf.function(jit_compile=True)); only with `graph`.
    jit_compile = False

    def import_module(self) -> Any:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        tf = super().import_module()
        if not getattr(self, "_configured", False):
            for gpu in tf.config.list_physical_devices("GPU"):
                tf.config.experimental.set_memory_growth(gpu, True)
            self._configured = True
        return tf

    def devices(self) -> list[str]:
        tf = self.import_module()
        return ["cpu"] + [f"cuda:{i}" for i, _ in enumerate(tf.config.list_physical_devices("GPU"))]

    def sync(self, device: str) -> None:
        if device.startswith("cuda"):
            self.import_module().test.experimental.sync_devices()

    def sync_fn(self, device: str):  # type: ignore[override]
        if not device.startswith("cuda"):
            return no_sync
        sync = self.import_module().test.experimental.sync_devices
        return sync

    def seed(self, n: int) -> None:
        """Seed TensorFlow and Keras. Keras 3 draws each initializer's seed from Python's `random`, so
        `tf.random.set_seed` alone leaves a model's initial weights different on every build."""
        self.import_module()
        import keras

        keras.utils.set_random_seed(n)  # Python's random, NumPy's and TensorFlow's generators
        self._seed = n

    def set_threads(self, n: int) -> None:
        tf = self.import_module()
        try:
            tf.config.threading.set_intra_op_parallelism_threads(n)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:
            pass  # runtime already initialised: TF_NUM_INTRAOP_THREADS (set by the runner) applies

    def threads(self) -> int | None:
        n = int(self.import_module().config.threading.get_intra_op_parallelism_threads())
        return n or None  # 0 means "TensorFlow decides"

    def reset_peak_memory(self, device: str) -> None:
        if device.startswith("cuda"):
            self.import_module().config.experimental.reset_memory_stats(tf_device(device).lstrip("/"))

    def peak_memory_bytes(self, device: str) -> tuple[int | None, str]:
        if device.startswith("cuda"):
            info = self.import_module().config.experimental.get_memory_info(tf_device(device).lstrip("/"))
            return int(info["peak"]), "tf.config.experimental.get_memory_info (memory growth on)"
        return None, "TensorFlow keeps no CPU allocator statistics"

    def kernel_profile(self, fn: Any, sync: Any, device: str, steps: int = 3) -> list[KernelRow]:
        from dlperf.profiling.tf_kernels import profile

        return profile(fn, sync, device, steps)

    def is_oom(self, exc: BaseException) -> bool:
        tf = self.import_module()
        return isinstance(exc, (MemoryError, tf.errors.ResourceExhaustedError))

    def info(self) -> FrameworkInfo:
        tf = self.import_module()
        build = dict(tf.sysconfig.get_build_info())
        return {
            "version": tf.__version__,
            "mode": ("tf.function(jit_compile=True)" if self.jit_compile else "tf.function") if self.graph
            else "eager",
            "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on for x86 CPUs)"),
            "cuda": build.get("cuda_version"),
            "cudnn": build.get("cudnn_version"),
            "threads": self.threads(),
        }


class TensorflowEagerFramework(TensorflowFramework):
    name = "tensorflow-eager"
    family = "tensorflow"
    graph = False


class TensorflowXlaFramework(TensorflowFramework):
    name = "tensorflow-xla"
    family = "tensorflow"
    jit_compile = True

    def import_module(self) -> Any:
        """TensorFlow, with XLA's persistent cache in a new folder where this adapter starts it (module doc)."""
        if _XLA_CACHE:
            return super().import_module()
        given = persistent_dir(os.environ.get("TF_XLA_FLAGS", ""))
        if given:
            _XLA_CACHE.append((Path(given), "the folder TF_XLA_FLAGS names"))
            return super().import_module()
        if "tensorflow" in sys.modules:
            _XLA_CACHE.append((None, "none: TensorFlow was started in this process before the tensorflow-xla "
                                     "adapter (it reads TF_XLA_FLAGS once, when it first lists its devices)"))
            return super().import_module()
        folder = cache_folder() / "xla"
        before = os.environ.get("TF_XLA_FLAGS")
        os.environ["TF_XLA_FLAGS"] = f"{before or ''} {PERSISTENT_FLAG}={folder}".strip()
        try:
            tf = super().import_module()  # lists the devices: TensorFlow reads TF_XLA_FLAGS now
        finally:
            if before is None:
                os.environ.pop("TF_XLA_FLAGS", None)
            else:
                os.environ["TF_XLA_FLAGS"] = before
        _XLA_CACHE.append((folder, "a new folder of this process"))
        return tf

    def compile_cache(self) -> tuple[Path | None, str]:
        """(XLA's persistent cache folder in this process, or None; how it was chosen or why there is none)."""
        self.import_module()
        return _XLA_CACHE[0]
