"""The framework adapter interface: one small class per framework, registered by name.

An adapter imports its framework only inside its methods, so that listing and
checking adapters costs nothing. A hook an adapter does not implement fails
loudly here rather than returning a made-up value.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from dlperf.timing import DeviceTimer

if TYPE_CHECKING:
    from dlperf.profiling.kernels import KernelRow


def no_sync() -> None:
    """The sync of a device whose calls return only when their work is done (CPU)."""
    return None


# Messages that memory exhaustion produces, but that other failures produce too.
OOM_SUSPECT_MARKERS = ("could not create a primitive",)


class FrameworkInfo(TypedDict, total=False):
    """What `Framework.info` says for the fingerprint: the version always, the rest where an adapter reads it.

    A string where a number is expected is what the adapter recorded instead of it (e.g. "unknown (Error)").
    """

    version: str | None
    threads: int | str | None
    mode: str
    backend: str
    # the libraries underneath
    blas: str
    blas_threads: int | None
    blas_info: str
    lapack_info: str
    onednn: str
    mkl: str
    cuda: str | None
    cudnn: int | str | None
    cuda_runtime: int | str
    jaxlib: str
    cxx: str
    openmp: bool
    matmul: str
    # the inference runtimes
    providers: list[str]
    device: str
    intra_op_threads: int | None
    devices: list[str]
    inference_num_threads: int | None
    ncs2: str
    cpu_pinning: bool | str
    cpu_default_precision: str


class UnsupportedError(RuntimeError):
    """The framework or device a case asks for is absent here (status `unsupported`)."""


class Framework:
    """Base adapter. Subclasses set the class attributes and override the hooks they support."""

    #: Registry name (`--framework NAME`).
    name: ClassVar[str] = ""
    #: Which builders serve it: a workload's `<family>_<workload>` module (tensorflow-eager is in "tensorflow").
    family: ClassVar[str] = ""
    #: Module imported to use the framework.
    module: ClassVar[str] = ""
    #: pip distribution names tried, in order, for the version (read without importing).
    distributions: ClassVar[tuple[str, ...]] = ()
    #: Extra of dlperf that installs it (`pip install -e '.[extra]'`).
    extra: ClassVar[str] = ""
    #: The seed `seed(n)` was given, where the adapter keeps it (`seed_value`); None: never, or not kept.
    _seed: int | None = None

    # -- presence, without importing -----------------------------------
    def available(self) -> bool:
        """True when the framework's module can be imported (checked without importing it)."""
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    @property
    def version(self) -> str | None:
        """Installed version from package metadata, or None when not installed."""
        for dist in self.distributions or (self.module,):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    @property
    def install_hint(self) -> str:
        return f"pip install -e '.[{self.extra or self.name}]'"

    # -- hooks every adapter provides ----------------------------------
    def import_module(self) -> Any:
        """Import and return the framework's module (raises UnsupportedError if absent)."""
        if not self.available():
            raise UnsupportedError(f"{self.name} is not installed ({self.install_hint})")
        return importlib.import_module(self.module)

    def devices(self) -> list[str]:
        """Devices this framework can run on here, e.g. ['cpu', 'cuda:0']."""
        raise NotImplementedError(f"{type(self).__name__} does not implement devices()")

    def check_device(self, device: str) -> str:
        """Return the canonical device name, or raise UnsupportedError naming what is present."""
        present = self.devices()
        canonical = "cuda:0" if device == "cuda" and "cuda:0" in present else device
        if canonical not in present:
            raise UnsupportedError(
                f"{self.name} has no device {device!r} here (present: {', '.join(present) or 'none'})"
            )
        return canonical

    def sync(self, device: str) -> None:
        """Block until all queued work on `device` has finished."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sync()")

    def sync_fn(self, device: str) -> Callable[[], None]:
        """A zero-argument sync for the timer (bound once, cheap to call)."""
        return lambda: self.sync(device)

    def prepare(self, fn: Callable[[], object], device: str) -> tuple[Callable[[], object], Callable[[], None]]:
        """(the step to time, the sync to bracket each sample with). Adapters whose
        sync needs the step's outputs (JAX) wrap the step here."""
        return fn, self.sync_fn(device)

    def device_timer(self, device: str) -> DeviceTimer | None:
        """A timer on the device's own clock (CUDA events), or None to use the host clock."""
        return None

    def seed(self, n: int) -> None:
        """Seed every random generator this framework uses (an adapter whose builders need the seed again keeps it
        in `_seed`: `seed_value`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement seed()")

    def seed_value(self) -> int | None:
        """The seed `seed(n)` last gave an adapter that keeps it (None: never, or not kept): the weights a runtime
        builder exports, the case a warm compile's process builds again."""
        return self._seed

    def set_threads(self, n: int) -> None:
        """Limit the framework's intra-op CPU threads to `n`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_threads()")

    def threads(self) -> int | None:
        """Intra-op CPU threads the framework will use, where it says."""
        return None

    def reset_peak_memory(self, device: str) -> None:
        """Forget the allocator's peak so the next reading covers only what follows."""
        return None

    def peak_memory_bytes(self, device: str) -> tuple[int | None, str]:
        """(peak bytes allocated on `device` since the last reset, how it was read).

        None with the reason when the framework keeps no allocator statistics for
        that device; the worker's peak RSS is stored separately in every case.
        """
        return None, f"{self.name} keeps no allocator statistics for {device}"

    def kernel_profile(self, fn: Callable[[], object], sync: Callable[[], None], device: str,
                       steps: int = 3) -> list[KernelRow]:
        """Kernel/op rows (dlperf.profiling.kernels) from the framework's own profiler over `steps` calls."""
        raise UnsupportedError(f"{self.name} has no kernel profiler in dlperf")

    def is_oom(self, exc: BaseException) -> bool:
        """Whether `exc` is this framework's out-of-memory error."""
        return isinstance(exc, MemoryError)

    def oom_suspect(self, exc: BaseException) -> bool:
        """Whether `exc` is an error that running out of memory can cause, among other things.

        oneDNN (inside PyTorch and TensorFlow on CPUs) reports a failed scratchpad
        allocation as "could not create a primitive", the same words it uses for
        an unsupported layer. Under a memory cap, the runner settles which it was
        by running one step again in a fresh worker with the cap raised (runner.recheck).
        """
        return any(marker in str(exc) for marker in OOM_SUSPECT_MARKERS)

    def info(self) -> FrameworkInfo:
        """Version and the libraries underneath (BLAS, oneDNN, cuDNN), for the fingerprint."""
        return {"version": self.version}


def registry(*classes: type[Framework]) -> dict[str, type[Framework]]:
    """Name -> adapter class; raises TypeError for an adapter without a name or family, or a name used twice,
    so that a new adapter cannot be registered half-declared (its builders are found by its family)."""
    out: dict[str, type[Framework]] = {}
    for cls in classes:
        if not cls.name or not cls.family:
            raise TypeError(f"{cls.__name__} must set both `name` and `family` to be registered")
        if cls.name in out:
            raise TypeError(f"framework {cls.name!r} is registered twice: {out[cls.name].__name__}, {cls.__name__}")
        out[cls.name] = cls
    return out
