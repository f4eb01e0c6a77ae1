"""`ddp`: data-parallel training with torch.distributed's DistributedDataParallel, one case = one torchrun job.

A case trains the `cnn` (study 001's CNNs) or `transformer` training step on `world_size` processes of one node
(a case's node count is fixed: `nodes` is 1, no elastic membership), gloo on CPUs, NCCL on GPUs (one GPU per
rank). `scaling: strong` splits a fixed global `batch` over the ranks (batch / world_size each); `scaling: weak`
gives every rank `batch` (the global batch grows with the world). Each timed sample is one optimizer step
(forward, backward with DDP's gradient all-reduce, update) as the slowest rank finished it; samples/s counts the
global batch (images, or tokens for the transformer). Scaling efficiency, throughput(N) / (N x throughput(1)),
is computed by the report from the cases of one run. The time in communication comes from torch's profiler
over a few extra steps (`dlperf.distributed.ddp`). The case is not timed by the worker's timer: `drive`
launches the job (`dlperf.distributed.launch`) and returns the ranks' samples.

A study's `mem_limit_mb` caps the worker's data segment (RLIMIT_DATA), and every rank inherits that cap as its
own: a limit is per process, so a job of N ranks may use up to N times the cap in all (it cannot be divided
among the ranks). An allocation a rank cannot make ends the case `oom` with that rank's reason.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dlperf.core.settings import RunSettings
from dlperf.frameworks import Framework
from dlperf.workloads.base import Cost, InnerParams, Step, Workload, WorkloadParams

#: The workloads whose training step is run data-parallel.
TRAINED_WORKLOADS = ("cnn", "transformer")


class DdpParams(WorkloadParams):
    workload: Literal["cnn", "transformer"] = Field(description="whose training step each rank runs")
    model: str = Field(description="a cnn model (alexnet, ...) or a transformer preset (gpt2-tiny, ...)")
    world_size: int = Field(gt=0, description="processes (ranks) of the job, one per GPU on CUDA")
    scaling: Literal["strong", "weak"] = Field(
        default="strong", description="strong: `batch` is the global batch, split over the ranks; weak: every "
        "rank gets `batch`")
    batch: int = Field(gt=0, description="strong: the global batch; weak: the batch of each rank")
    seq_len: int | None = Field(default=None, gt=0, description="transformer: tokens per sequence (default 128)")
    image_size: int | None = Field(default=None, gt=0, description="cnn: square input side (default: the model's)")
    threads_per_rank: int = Field(default=1, gt=0, description="CPU threads of each rank (intra-op)")
    nodes: Literal[1] = Field(default=1, description="machines of the job: one (a case's node count is fixed)")
    bucket_cap_mb: float = Field(default=25.0, gt=0, description="DDP's gradient bucket size (its default 25)")
    profile_steps: int = Field(default=5, ge=0, description="extra steps under torch's profiler for the "
                                                            "communication time (0: none)")

    @model_validator(mode="after")
    def _consistent(self) -> DdpParams:
        if self.scaling == "strong" and self.batch % self.world_size:
            raise ValueError(f"strong scaling splits the global batch {self.batch} over {self.world_size} ranks: "
                             f"it must be a multiple of world_size")
        if self.workload == "cnn" and self.seq_len is not None:
            raise ValueError("seq_len applies to the transformer, not to a cnn")
        if self.workload == "transformer" and self.image_size is not None:
            raise ValueError("image_size applies to a cnn, not to the transformer")
        self.inner_params()  # the trained step's own checks (an unknown model, an image too small, ...)
        return self

    @property
    def batch_per_rank(self) -> int:
        return self.batch // self.world_size if self.scaling == "strong" else self.batch

    @property
    def global_batch(self) -> int:
        return self.batch if self.scaling == "strong" else self.batch * self.world_size

    def inner_params(self) -> InnerParams:
        """Each rank's training step: the inner workload's parameters with this rank's batch."""
        raw: InnerParams = {"model": self.model, "task": "train", "batch": self.batch_per_rank}
        if self.workload == "transformer":
            raw["seq_len"] = self.seq_len or 128
        elif self.image_size is not None:
            raw["image_size"] = self.image_size
        from dlperf.workloads.registry import get_workload

        get_workload(self.workload).parse(raw)  # ValueError naming the bad field
        return raw

    def trained_params(self) -> dict[str, Any]:
        """One rank's training step with every default resolved (learning rate, classes, precision...), as plain
        values: what each rank of the job builds (`dlperf.distributed.ddp_rank` never imports the workloads)."""
        from dlperf.workloads.registry import get_workload

        return get_workload(self.workload).parse(self.inner_params()).model_dump(mode="json")

    @property
    def sample_unit(self) -> str:
        """What a sample is: the inner workload's unit (image for a cnn, token for the transformer)."""
        from dlperf.workloads.registry import get_workload

        return get_workload(self.workload).sample_unit


class Ddp(Workload[DdpParams]):
    name = "ddp"
    description = "data-parallel training (DistributedDataParallel under torchrun): throughput and scaling"
    Params = DdpParams
    sample_unit = "sample"
    runs_in_own_processes = True  # the torchrun job's ranks; the worker never creates a CUDA context

    def cost(self, params: DdpParams) -> Cost:
        """The whole job's step: every rank's training step (the inner workload's cost) times the world size."""
        from dlperf.workloads.registry import get_workload

        inner = get_workload(params.workload)
        per_rank = inner.cost(inner.parse(params.inner_params()))
        n = params.world_size
        return Cost(flops=None if per_rank.flops is None else per_rank.flops * n,
                    bytes_moved=None if per_rank.bytes_moved is None else per_rank.bytes_moved * n,
                    samples=per_rank.samples * n)

    def drive(self, fw: Framework, device: str, params: DdpParams, step: Step,
              settings: RunSettings) -> dict[str, Any]:
        """Launch the torchrun job (`dlperf.distributed.ddp`) and return its metrics and samples."""
        from dlperf.distributed.ddp import drive

        return drive(fw, device, params, step, settings)


__all__ = ["Ddp", "DdpParams"]
