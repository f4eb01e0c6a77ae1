"""dlperf.nn as frameworks, one per operator backend: nn-sequential, nn-vectorized (CPU) and nn-cuda (GPU)."""

from __future__ import annotations

from typing import Any

from dlperf import __version__
from dlperf.frameworks.base import Framework, FrameworkInfo, UnsupportedError, no_sync


class NnFramework(Framework):
    name = "nn-vectorized"
    family = "nn"
    module = "dlperf.nn"
    backend = "vectorized"
    extra = ""

    @property
    def version(self) -> str | None:
        return __version__

    @property
    def install_hint(self) -> str:
        return "part of dlperf"

    def import_module(self) -> Any:
        from dlperf.nn import operators as ops

        try:
            ops.set_mode(self.backend)
        except ops.BackendUnavailable as exc:
            raise UnsupportedError(str(exc)) from None
        import dlperf.nn as nn

        return nn

    def devices(self) -> list[str]:
        self.import_module()
        return ["cpu"]

    def dtypes(self) -> tuple[str, ...]:
        """The dtypes this backend computes in (its `DTYPES`)."""
        from dlperf.nn import operators as ops

        self.import_module()
        return ops.dtypes(self.backend)

    def check_dtype(self, dtype: str) -> None:
        """UnsupportedError, with the reason, for a dtype this backend does not compute in (never a silent cast)."""
        supported = self.dtypes()
        if dtype not in supported:
            raise UnsupportedError(f"{self.name} computes in {'/'.join(supported)} only, not {dtype}")

    def sync(self, device: str) -> None:
        return None

    def sync_fn(self, device: str):  # type: ignore[override]
        return no_sync

    def seed(self, n: int) -> None:
        import numpy as np

        np.random.seed(n)

    def set_threads(self, n: int) -> None:
        from threadpoolctl import threadpool_limits

        self._limits = threadpool_limits(limits=n)  # NumPy's BLAS, used by the vectorized backend

    def info(self) -> FrameworkInfo:
        return {"version": __version__, "backend": self.backend}


class NnSequentialFramework(NnFramework):
    name = "nn-sequential"
    family = "nn"
    backend = "sequential"


class NnCudaFramework(NnFramework):
    """The cuda backend with its own tiled matmul kernel."""

    name = "nn-cuda"
    family = "nn"
    backend = "cuda"
    matmul = "tiled"

    def import_module(self) -> Any:
        nn = super().import_module()
        from dlperf.nn.backends import cuda

        cuda.MATMUL = self.matmul
        return nn

    def devices(self) -> list[str]:
        self.import_module()
        return ["cuda:0"]

    def sync(self, device: str) -> None:
        import cupy

        cupy.cuda.Device(0).synchronize()

    def sync_fn(self, device: str):  # type: ignore[override]
        return lambda: self.sync(device)

    def info(self) -> FrameworkInfo:
        return super().info() | {"matmul": self.matmul}


class NnCudaCublasFramework(NnCudaFramework):
    """The cuda backend with cuBLAS for the matrix product, reported separately from the tiled kernel."""

    name = "nn-cuda-cublas"
    family = "nn"
    matmul = "cublas"
