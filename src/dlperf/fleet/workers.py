"""Starting the fleet's Dask processes for dlperf: a worker per machine, and a scheduler.

A dlperf worker is a plain `dask worker` with a fixed shape: no nanny (a nanny would not outlive a lost scheduler
either: since Dask dropped worker reconnection, both exit then) and one process with one thread (one case
per machine at a time: a case's own process may use every core), resources `machine=1` plus one entry per device
kind it has (`cpu=1`, `cuda=N` where NVML or torch sees N GPUs that CUDA_VISIBLE_DEVICES leaves), the fleet's
caches preloaded, and DLPERF_MACHINE_LABEL set from --label so that this machine's environment carries the label.
"""

from __future__ import annotations

import os
import sys

from dlperf.hardware.identity import MACHINE_LABEL_ENV


def detected_devices() -> dict[str, int]:
    """Device kind -> count on this machine: cpu always; cuda where NVML (else torch) sees GPUs, as many as
    CUDA_VISIBLE_DEVICES leaves (`runner.cases.cuda_devices_here`, as a local run counts them)."""
    from dlperf.runner.cases import cuda_devices_here

    found = {"cpu": 1}
    n, _ = cuda_devices_here()
    if n:
        found["cuda"] = n
    else:
        try:
            import torch  # only where NVML sees none: a GPU torch can use still counts

            if torch.cuda.is_available():
                found["cuda"] = torch.cuda.device_count()
        except ImportError:
            pass
    return found


def parse_devices(devices: tuple[str, ...] | list[str]) -> dict[str, int]:
    """--device values (cpu, cuda, cuda=2) -> device kind -> count."""
    out: dict[str, int] = {}
    for text in devices:
        kind, _, count = text.partition("=")
        kind = kind.split(":", 1)[0].strip()
        if not kind or (count and not count.isdigit()) or (count and int(count) < 1):
            raise ValueError(f"--device {text!r}: give a device kind, optionally with a count (cpu, cuda, cuda=2)")
        out[kind] = int(count) if count else 1
    return out


def worker_argv(scheduler: str, *, name: str | None, devices: dict[str, int], extra: list[str] | None = None
                ) -> list[str]:
    """The `dask worker` command line of a dlperf fleet worker (see the module's doc)."""
    resources = " ".join(["machine=1", *(f"{k}={v}" for k, v in sorted(devices.items()))])
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--no-nanny", "--nthreads", "1",
            "--resources", resources, "--preload", "dlperf.fleet.preload"]
    if name:
        argv += ["--name", name]
    return argv + list(extra or [])


def worker_env(label: str | None) -> dict[str, str]:
    """This process's environment, with the machine label for the worker's fingerprints where given."""
    env = dict(os.environ)
    if label:
        env[MACHINE_LABEL_ENV] = label
    return env


def scheduler_argv(port: int, scheduler_file: str | None, extra: list[str] | None = None) -> list[str]:
    """The `dask scheduler` command line (its address is printed, and written to `scheduler_file` if given)."""
    argv = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", str(port)]
    if scheduler_file:
        argv += ["--scheduler-file", scheduler_file]
    return argv + list(extra or [])
