"""The model workload's step: a `Step` that carries the model's own figures, and the first output of a call as
NumPy (what the worker keeps of the last call). Below every path's builder (torch, its compilers, the runtimes),
so that none of them imports another for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlperf.workloads.base import Step
from dlperf.workloads.model import prepare as prep
from dlperf.workloads.model.records import ModelInfo


@dataclass(frozen=True)
class ModelStep(Step):
    """A Step with the model's own figures (`Model.extra_metrics` reads them; `gate` is called after timing)."""

    info: ModelInfo = field(default_factory=lambda: ModelInfo())


def first_output(torch: Any, out: Any) -> Any:
    """The first tensor of a call's output as a NumPy array (an empty one for no output)."""
    import numpy as np

    arrays = prep.as_numpy(torch, out) if out is not None else []
    return arrays[0] if arrays else np.array([])


__all__ = ["ModelStep", "first_output"]
