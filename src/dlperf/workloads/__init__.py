"""Registry of workloads, by name."""

from __future__ import annotations

from dlperf.workloads.backends import Backends
from dlperf.workloads.base import Cost, Workload, WorkloadParams
from dlperf.workloads.cnn import Cnn
from dlperf.workloads.collectives import Collectives
from dlperf.workloads.ddp import Ddp
from dlperf.workloads.faults import Faults
from dlperf.workloads.mlp import Mlp
from dlperf.workloads.model import Model
from dlperf.workloads.ops import Ops
from dlperf.workloads.peaks import Peaks
from dlperf.workloads.serve import Serve
from dlperf.workloads.transformer import Transformer

REGISTRY: dict[str, type[Workload]] = {w.name: w for w in (Ops, Mlp, Backends, Cnn, Peaks, Faults, Transformer, Serve,
                                                           Ddp, Collectives, Model)}


def get_workload(name: str) -> Workload:
    try:
        return REGISTRY[name]()
    except KeyError:
        raise KeyError(f"unknown workload {name!r} (known: {', '.join(sorted(REGISTRY))})") from None


__all__ = ["REGISTRY", "Cost", "Workload", "WorkloadParams", "get_workload"]
