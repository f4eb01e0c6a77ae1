"""The ops in CuPy: NumPy's builder, which runs on CuPy's NumPy-compatible API (`fw.import_module()` is cupy)."""

from __future__ import annotations

from dlperf.workloads.ops.numpy_ops import build

__all__ = ["build"]
