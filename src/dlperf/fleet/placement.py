"""Which machine-worker of a fleet can run a case: the resources a case asks for, and what a worker offers.

A case asks for `machine=1` (one case per machine at a time) and its device kind: `cpu=1`, or on CUDA as many
GPUs as it uses: `cuda:K` needs K+1 (GPU K exists there), and a workload that runs its own processes (a torchrun
job: `Workload.runs_in_own_processes`, one GPU per rank) needs `world_size`. A worker offers the resources it
advertised (`dlperf fleet worker`) and the frameworks its probe found installed (`tasks.probe_worker`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from dlperf.studies import Case


def device_kind(device: str) -> str:
    """The worker resource a case's device needs: 'cuda:1' -> 'cuda', 'cpu' -> 'cpu'."""
    return device.split(":", 1)[0]


def device_count(case: Case) -> int:
    """How many units of its device kind `case` uses (see the module's doc)."""
    from dlperf.workloads import REGISTRY

    kind, _, index = case.device.partition(":")
    if kind == "cpu":
        return 1
    count = int(index) + 1 if index.isdigit() else 1
    workload = REGISTRY.get(case.workload)
    world_size = case.params.get("world_size")
    if workload is not None and workload.runs_in_own_processes and isinstance(world_size, int):
        count = max(count, world_size)
    return count


def needs(case: Case) -> dict[str, int]:
    """The Dask resources `case` asks for."""
    return {"machine": 1, device_kind(case.device): device_count(case)}


class DaskWorker(TypedDict, total=False):
    """The scheduler's record of a worker (`Scheduler.identity()["workers"][address]`), by the keys dlperf reads,
    plus what its probe added (`executor.DaskExecutor._refresh`): the frameworks installed there and its host name
    as it sees it. The scheduler's other keys stay in the dict, unread."""

    name: str | int  # Dask names a worker by a string or a number
    host: str
    resources: dict[str, float]
    frameworks: set[str]
    hostname: str | None


def offers(worker: DaskWorker, case: Case) -> bool:
    """Whether a worker (the scheduler's record, plus "frameworks": those installed there, from its probe) can
    run `case`: a machine-worker with enough of its device and its framework."""
    have = worker.get("resources") or {}
    if not have.get("machine"):
        return False
    if any(have.get(k, 0) < v for k, v in needs(case).items()):
        return False
    frameworks = worker.get("frameworks")
    return frameworks is None or case.framework in frameworks


def why_none(case: Case, workers: Iterable[DaskWorker]) -> str:
    """Why no worker among `workers` can run `case` (one short phrase, the same for alike cases)."""
    workers = [w for w in workers if (w.get("resources") or {}).get("machine")]
    kind, count = device_kind(case.device), device_count(case)
    with_device = [w for w in workers if (w.get("resources") or {}).get(kind, 0) >= count]
    if not with_device:
        return f"no worker advertises {kind}" + (f"={count}" if count > 1 else "")
    return f"no worker with {kind}" + (f"={count}" if count > 1 else "") + f" has {case.framework} installed"
