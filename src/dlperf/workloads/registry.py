"""The workloads by name. Below every workload package, so that a workload wrapping another (`ddp` and `serve`
run a cnn, transformer or model step) looks it up here without importing `dlperf.workloads`, which imports it:
that package fills REGISTRY when it is imported, as importing any workload module imports it first."""

from __future__ import annotations

from dlperf.workloads.base import Workload

REGISTRY: dict[str, type[Workload]] = {}


def register(*workloads: type[Workload]) -> None:
    for w in workloads:
        REGISTRY[w.name] = w


def get_workload(name: str) -> Workload:
    try:
        return REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown workload {name!r} (known: {', '.join(sorted(REGISTRY))})") from None
