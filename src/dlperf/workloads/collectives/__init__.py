"""`collectives`: the bandwidth of all-reduce, all-gather, reduce-scatter and broadcast, one case = one torchrun job.

A case times one collective of one message size on `world_size` processes of one node (gloo on CPUs, NCCL on
GPUs). Sizes and bandwidths follow nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md): `size_bytes` is S, the
largest buffer of the operation (all-reduce and broadcast: the buffer; all-gather: the gathered output, n times
what each rank sends; reduce-scatter: the input, n times what each rank receives). Algorithm bandwidth is
S / t; bus bandwidth is algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather and reduce-scatter, x 1 for
broadcast, so that it can be set against the links' speed whatever n is. t is the time of one operation as the
slowest rank saw it. The workload's cost counts S bytes per operation, so the stored bytes/s is the algbw.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dlperf.core.settings import RunSettings
from dlperf.distributed.bandwidth import DTYPE_BYTES, OPS, bandwidths, bus_factor
from dlperf.frameworks import Framework
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams


class CollectivesParams(WorkloadParams):
    op: Literal["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
    size_bytes: int = Field(gt=0, description="S as nccl-tests counts it: the operation's largest buffer")
    world_size: int = Field(gt=0, description="processes (ranks) of the job, one per GPU on CUDA")
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    threads_per_rank: int = Field(default=1, gt=0, description="CPU threads of each rank")
    nodes: Literal[1] = Field(default=1, description="machines of the job: one (a case's node count is fixed)")

    @model_validator(mode="after")
    def _divisible(self) -> CollectivesParams:
        item = DTYPE_BYTES[self.dtype]
        unit = item * (self.world_size if self.op in ("all_gather", "reduce_scatter") else 1)
        if self.size_bytes % unit:
            raise ValueError(f"{self.op} of {self.dtype} on {self.world_size} ranks needs size_bytes a multiple of "
                             f"{unit} (whole elements{', split evenly over the ranks' if unit > item else ''})")
        return self

    @property
    def elements(self) -> int:
        """Elements of S."""
        return self.size_bytes // DTYPE_BYTES[self.dtype]


class Collectives(Workload[CollectivesParams]):
    name = "collectives"
    description = "collective bandwidth (all-reduce, all-gather, reduce-scatter, broadcast) under torchrun"
    Params = CollectivesParams
    sample_unit = "operation"
    runs_in_own_processes = True  # the torchrun job's ranks; the worker never creates a CUDA context

    def cost(self, params: CollectivesParams) -> Cost:
        """S bytes per operation: the derived bytes/s is nccl-tests' algorithm bandwidth. No FLOPs are modelled."""
        return Cost(flops=None, bytes_moved=float(params.size_bytes), samples=1)

    def drive(self, fw: Framework, device: str, params: CollectivesParams, step: Step,
              settings: RunSettings) -> dict[str, Any]:
        """Launch the torchrun job (`dlperf.distributed.collectives`) and return its metrics and samples."""
        from dlperf.distributed.collectives import drive

        return drive(fw, device, params, step, settings)


__all__ = ["OPS", "Collectives", "CollectivesParams", "bandwidths", "bus_factor"]
