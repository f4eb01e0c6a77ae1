"""The operator table of dlperf.nn: one set of primitives, several implementations, switched at run time.

    from dlperf.nn import operators as ops
    ops.set_mode("vectorized")            # or "sequential", "cuda"
    with ops.Device("sequential"):        # nestable; restores the previous mode, exceptions included
        y = ops.matmul(a, b)

Every backend module defines the same functions (see PRIMITIVES). Arrays are the
backend's own (NumPy for sequential and vectorized, CuPy for cuda); `asarray`
and `to_numpy` move data in and out. Layers are written only in terms of these.
Each backend names the dtypes it computes in (`DTYPES`, see `dtypes()`) and
keeps arrays in them: a float32 array is never silently widened to float64.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

PRIMITIVES = (
    "asarray", "to_numpy", "add", "sub", "mul", "div", "exp", "log", "maximum", "relu", "relu_grad", "matmul",
    "transpose", "sum", "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "maxpool2d", "maxpool2d_grad",
    "softmax_cross_entropy",
)
MODES = ("sequential", "vectorized", "cuda")

_state = threading.local()
#: Backends already imported and checked: dispatch must cost nothing per call (profiled: it did).
_LOADED: dict[str, ModuleType] = {}


class BackendUnavailable(RuntimeError):
    """The backend asked for cannot run here (e.g. cuda without a GPU)."""


def _load(mode: str) -> ModuleType:
    cached = _LOADED.get(mode)
    if cached is not None:
        return cached
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
    try:
        module = importlib.import_module(f"dlperf.nn.backends.{mode}")
    except ModuleNotFoundError as exc:
        if exc.name != f"dlperf.nn.backends.{mode}":
            raise
        raise BackendUnavailable(f"the {mode} backend of dlperf.nn is not built yet") from None
    check = getattr(module, "check_available", None)
    if check is not None:
        check()
    missing = [p for p in (*PRIMITIVES, "DTYPES") if not hasattr(module, p)]
    if missing:
        raise NotImplementedError(f"backend {mode!r} lacks {', '.join(missing)}")
    _LOADED[mode] = module
    return module


def dtypes(mode: str | None = None) -> tuple[str, ...]:
    """The dtypes backend `mode` (default: the current one) computes in, e.g. ("float32", "float64")."""
    return tuple(_load(mode or get_mode()).DTYPES)


def get_mode() -> str:
    return getattr(_state, "mode", "vectorized")


def backend() -> ModuleType:
    return _load(get_mode())


def set_mode(mode: str) -> None:
    """Switch every operator to `mode` (checked first: an unusable backend is never selected)."""
    _load(mode)
    _state.mode = mode


class Device:
    """`with Device("sequential"): ...` runs the block on that backend and restores the previous one."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __enter__(self) -> Device:
        self._previous = get_mode()
        set_mode(self.mode)
        return self

    def __exit__(self, *exc: object) -> None:
        _state.mode = self._previous


def __getattr__(name: str) -> Any:
    # ops.matmul(...) -> the current backend's matmul
    if name in PRIMITIVES:
        return getattr(backend(), name)
    raise AttributeError(f"module 'dlperf.nn.operators' has no attribute {name!r}")
