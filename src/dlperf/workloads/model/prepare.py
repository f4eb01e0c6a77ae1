"""The model and its inputs, built from a case's parameters in a process that has torch (a torch worker, the
export child): the source loaded after `torch.manual_seed(seed)`, the inputs seeded, and what every path shares
(the outputs flattened for the gate, the FLOPs counted on the eager module, the parameter count)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlperf.sources import Loaded, SourceError, load
from dlperf.sources.base import called
from dlperf.workloads.model import ModelParams


@dataclass
class Prepared:
    loaded: Loaded
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    @property
    def module(self) -> Any:
        return self.loaded.module


def prepare(torch: Any, p: ModelParams, seed: int) -> Prepared:
    """The source's model (eval mode, float32) and its inputs at the case's batch and sequence length."""
    loaded = load(p.source, seed)
    if p.task not in loaded.tasks:
        raise SourceError(f"{p.source}: this model runs {', '.join(loaded.tasks)}, not task {p.task}")
    args, kwargs = inputs(torch, p, loaded)
    return Prepared(loaded, args, kwargs)


def inputs(torch: Any, p: ModelParams, loaded: Loaded) -> tuple[tuple[Any, ...], dict[str, Any]]:
    from dlperf.sources import inputs as inp
    from dlperf.sources.python_source import import_file, split_inputs

    if p.input:
        return inp.make(torch, [inp.parse_input(t) for t in p.input], p.batch, p.seq)
    if p.inputs_fn:
        where, _, name = p.inputs_fn.rpartition(":")
        if not where.endswith(".py") or not Path(where).is_file():
            raise SourceError(f"--inputs {p.inputs_fn}: expected an existing path.py:FN")
        fn = getattr(import_file(Path(where).resolve(), where), name, None)
        if not callable(fn):
            raise SourceError(f"--inputs {p.inputs_fn}: {where} has no function {name!r}")
        torch.manual_seed(0)
        return split_inputs(called(fn, f"--inputs {p.inputs_fn}: calling it", p.batch))
    if loaded.example_inputs is None:
        raise SourceError(f"{p.source}: give its inputs: --input NAME:DTYPE[DIMS] (e.g. x:float32[B,256]), "
                          "--inputs path.py:FN, or an example_inputs(batch) method on the module")
    return called(loaded.example_inputs, f"{p.source}: example_inputs({p.batch})", p.batch, p.seq)


def tensors(torch: Any, out: Any) -> list[Any]:
    """Every floating or integer tensor in a model's output (a tensor, tuple, list, dict or a transformers
    ModelOutput), in order; caches and other objects are skipped."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in tensors(torch, v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in tensors(torch, v)]
    return []


def as_numpy(torch: Any, out: Any) -> list[np.ndarray]:
    """The output's tensors as float64 NumPy arrays (for the gate)."""
    return [t.detach().float().cpu().numpy().astype(np.float64) if t.is_floating_point()
            else t.detach().cpu().numpy().astype(np.float64) for t in tensors(torch, out)]


def count_flops(torch: Any, fn: Any) -> float | None:
    """FLOPs of one call of `fn` by torch's FlopCounterMode (matrix products and convolutions, 2 per
    multiply-add, as torch counts them); None when counting fails."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        counter = FlopCounterMode(display=False)
        with counter:
            fn()
        return float(counter.get_total_flops())
    except Exception:
        return None


def param_count(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters()))


def to_device(torch: Any, value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(torch, v, device) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(torch, v, device) for v in value)
    return value
