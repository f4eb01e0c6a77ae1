"""A served step that takes a known time per predict call, and quick serve parameters for LoadGen runs."""

from __future__ import annotations

import time
from typing import Any

from dlperf.workloads.base import Step
from dlperf.workloads.serve import ServeParams

#: The fake step's time per predict call, whatever its batch (s).
PREDICT_S = 0.002


def sleeping_step(predict_s: float = PREDICT_S, fail_after: int | None = None) -> Step:
    """A step whose predict(n) sleeps `predict_s` (raising RuntimeError after `fail_after` calls, where set)."""
    calls = [0]

    def predict(n: int) -> None:
        calls[0] += 1
        if fail_after is not None and calls[0] > fail_after:
            raise RuntimeError("deliberate predict failure")
        time.sleep(predict_s)

    return Step(fn=lambda: predict(1), predict=predict)


def quick(scenario: str, **over: Any) -> ServeParams:
    """A serve case of about a second (its served model is a name only: the fake step stands in for it)."""
    raw: dict[str, Any] = {"workload": "cnn", "model": "alexnet", "scenario": scenario, "max_batch": 4,
                           "min_duration_s": 1.0, "min_query_count": 10, "target_latency_ms": 30.0}
    return ServeParams.model_validate(raw | over)
