"""`collectives` on torch: what this machine can run is checked here; the job is `dlperf.distributed.collectives`."""

from __future__ import annotations

from typing import Any

from dlperf.workloads.collectives import CollectivesParams


def build(fw: Any, device: str, p: CollectivesParams) -> Any:
    from dlperf.distributed.launch import check_job
    from dlperf.workloads.base import driven_step

    check_job(device, p.world_size)
    return driven_step("a torchrun case is run by its workload's drive, never by the worker's timer")
