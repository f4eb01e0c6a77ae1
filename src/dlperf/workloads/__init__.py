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
from dlperf.workloads.registry import REGISTRY, get_workload, register
from dlperf.workloads.serve import Serve
from dlperf.workloads.transformer import Transformer

register(Ops, Mlp, Backends, Cnn, Peaks, Faults, Transformer, Serve, Ddp, Collectives, Model)


__all__ = ["REGISTRY", "Cost", "Workload", "WorkloadParams", "get_workload"]
