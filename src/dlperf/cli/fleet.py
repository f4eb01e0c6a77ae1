"""`dlperf fleet worker|scheduler`: the Dask processes of a fleet; and what `dlperf run --executor dask` needs.

A fleet is one Dask scheduler, one `dlperf fleet worker` per machine, and a store they all reach (PostgreSQL);
`dlperf run STUDY --executor dask --scheduler ADDR --db URL` then sends each case to a machine with its device.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import click

from dlperf.errors import DlperfError

FLEET_EXTRA = "pip install 'dlperf[fleet]' (Dask distributed)"


def _need_distributed() -> None:
    """One line where Dask distributed is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise DlperfError(f"a fleet needs Dask distributed: {FLEET_EXTRA}") from None


@click.group()
def fleet() -> None:
    """Machines that run a study's cases together (Dask distributed) into one store.

    \b
    1. one machine:      dlperf fleet scheduler            (prints tcp://HOST:8786)
    2. every machine:    dlperf fleet worker --scheduler tcp://HOST:8786 --label NAME
    3. anywhere:         dlperf run STUDY --executor dask --scheduler tcp://HOST:8786 --db postgresql+psycopg://...

    Security: the scheduler accepts anyone who reaches its port, and whoever does can run code on every worker:
    keep the fleet on a private network (or configure Dask's TLS security). The store URL, with any password in
    it, is sent to every worker.
    """


@fleet.command()
@click.option("--scheduler", required=True, metavar="ADDR", help="the Dask scheduler, tcp://HOST:PORT")
@click.option("--label", default=None, metavar="NAME",
              help="this machine's name in the store (DLPERF_MACHINE_LABEL: part of its environment) and the "
                   "worker's name")
@click.option("--device", "devices", multiple=True, metavar="KIND[=N]",
              help="devices to advertise (repeatable: cpu, cuda=2) [default: cpu, and cuda where GPUs are seen]")
def worker(scheduler: str, label: str | None, devices: tuple[str, ...]) -> None:
    """Run this machine's Dask worker for dlperf: one case at a time, each in dlperf's own worker process.

    It advertises the resources machine=1 and one per device kind (cpu=1, cuda=N); the client sends it one case
    at a time, only cases it can run. It runs until stopped (Ctrl-C) or until its scheduler goes away (it does
    not wait for a restarted one: start it again, e.g. under a service manager that restarts it); a case it was
    running when it died is run again by another worker. Run one per machine: two on one host run two cases at
    once (the client warns).
    """
    from dlperf.fleet.workers import detected_devices, parse_devices, worker_argv, worker_env

    _need_distributed()
    if label is not None and not label.strip():
        raise click.BadParameter("give a non-empty name", param_hint="'--label'")
    try:
        found = parse_devices(devices) if devices else detected_devices()
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--device'") from None
    argv = worker_argv(scheduler, name=label.strip() if label else None, devices=found)
    shown = " ".join(f"{k}={v}" for k, v in sorted(found.items()))
    click.echo(f"dlperf fleet worker {label or socket.gethostname()}: machine=1 {shown} -> {scheduler}", err=True)
    os.execve(argv[0], argv, worker_env(label.strip() if label else None))  # Dask's own worker from here on


@fleet.command()
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8786, show_default=True,
              help="the port to listen on (0: any free one)")
@click.option("--scheduler-file", default=None, metavar="FILE",
              help="also write the scheduler's address to FILE (JSON, its 'address' key)")
@click.option("--dashboard-address", default=":8787", show_default=True, metavar="[HOST]:PORT",
              help="where Dask's diagnostics dashboard listens (:0: any free port)")
def scheduler(port: int, scheduler_file: str | None, dashboard_address: str) -> None:
    """Run a Dask scheduler for a fleet (this is `dask scheduler --port PORT`: any Dask scheduler will do).

    It listens unauthenticated: anyone who can reach PORT can run code on the workers (private network, or TLS).

    Workers join it with `dlperf fleet worker --scheduler tcp://THIS_HOST:PORT`; runs are sent to it with
    `dlperf run STUDY --executor dask --scheduler tcp://THIS_HOST:PORT`.
    """
    from dlperf.fleet.workers import scheduler_argv

    _need_distributed()
    argv = scheduler_argv(port, scheduler_file, ["--dashboard-address", dashboard_address])
    os.execv(argv[0], argv)


def check_executor(executor: str, scheduler: str | None) -> None:
    """--scheduler goes with --executor dask, and --executor dask needs it (a usage error otherwise)."""
    if scheduler and executor != "dask":
        raise click.UsageError("--scheduler ADDR is for --executor dask (cases run here with --executor local)")
    if executor == "dask" and not scheduler:
        raise click.UsageError("--executor dask needs --scheduler tcp://HOST:PORT (see 'dlperf fleet --help')")


def check_scheduler(scheduler: str) -> None:
    """--scheduler's address, checked before any store is opened: one line where it is not one (a store would
    otherwise be created for a run that cannot start)."""
    from dlperf.fleet.executor import check_address

    _need_distributed()
    check_address(scheduler)


def connect_fleet(scheduler: str, store_url: str, warn: Any) -> Any:
    """The DaskExecutor of `scheduler`, connected and its workers checked (one line if not): nothing is stored
    before this succeeds."""
    from dlperf.fleet.executor import DaskExecutor

    _need_distributed()
    return DaskExecutor(scheduler, store_url, warn=warn).connect()
