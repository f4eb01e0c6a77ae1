"""PyTensor (Theano's living successor) and, where an old Theano imports, Theano itself.

Steps are compiled functions whose results are written into shared variables
(`updates`), so the output stays in place and nothing is copied back per call.
CPU only: PyTensor has no GPU backend of its own.
"""

from __future__ import annotations

import warnings
from typing import Any

from dlperf.frameworks.base import Framework, FrameworkInfo, no_sync


class PytensorFramework(Framework):
    name = "pytensor"
    family = "pytensor"
    module = "pytensor"
    distributions = ("pytensor",)
    extra = "pytensor"

    def import_module(self) -> Any:
        mod = super().import_module()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the no-BLAS warning is recorded in info() instead
            __import__(f"{self.module}.tensor")
        return mod

    def devices(self) -> list[str]:
        self.import_module()
        return ["cpu"]

    def sync(self, device: str) -> None:
        return None  # compiled functions return when their work is done

    def sync_fn(self, device: str):  # type: ignore[override]
        return no_sync

    def seed(self, n: int) -> None:
        import numpy as np

        np.random.seed(n)

    def set_threads(self, n: int) -> None:
        # Elementwise C code is single-threaded unless openmp is on; BLAS follows
        # OMP/OPENBLAS_NUM_THREADS, which the runner sets before the worker starts.
        self._threads = n

    def info(self) -> FrameworkInfo:
        mod = self.import_module()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "could not link to a BLAS": said below instead
            ldflags = str(mod.config.blas__ldflags or "")
        return {
            "version": mod.__version__,
            "mode": str(mod.config.mode),
            "cxx": str(mod.config.cxx) or "none (Python implementations)",
            "blas": ldflags or "not linked (matrix products fall back to NumPy)",
            "openmp": bool(mod.config.openmp),
        }


class TheanoFramework(PytensorFramework):
    name = "theano"
    family = "pytensor"
    module = "theano"
    distributions = ("Theano", "theano")
    extra = "theano"

    @property
    def install_hint(self) -> str:
        return "Theano is unmaintained and does not install on current Python; use pytensor"
