"""The fleet's pieces without a cluster: worker command lines, devices, store URLs, the rows' fleet metrics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dlperf.core.result import Metrics
from dlperf.errors import LeaseLostError
from dlperf.fleet.executor import shared_url
from dlperf.fleet.placement import device_kind, needs, offers, why_none
from dlperf.fleet.tasks import with_fleet
from dlperf.fleet.workers import detected_devices, parse_devices, scheduler_argv, worker_argv, worker_env
from tests.factories import case


def test_a_worker_runs_one_case_at_a_time_and_advertises_its_devices() -> None:
    argv = worker_argv("tcp://h:8786", name="jetson", devices={"cpu": 1, "cuda": 2})
    assert argv[:4] == [sys.executable, "-m", "distributed.cli.dask_worker", "tcp://h:8786"]
    assert argv[argv.index("--nthreads") + 1] == "1" and "--no-nanny" in argv
    assert argv[argv.index("--resources") + 1] == "machine=1 cpu=1 cuda=2"
    assert argv[argv.index("--name") + 1] == "jetson"
    assert argv[argv.index("--preload") + 1] == "dlperf.fleet.preload"
    assert worker_env("jetson")["DLPERF_MACHINE_LABEL"] == "jetson"
    assert scheduler_argv(0, "/tmp/s.json")[-4:] == ["--port", "0", "--scheduler-file", "/tmp/s.json"]


def test_devices_given_on_the_command_line() -> None:
    assert parse_devices(["cpu", "cuda=2"]) == {"cpu": 1, "cuda": 2}
    assert parse_devices(["cuda:0"]) == {"cuda": 1}
    for bad in (["cuda=x"], ["=2"], ["cuda=0"]):
        with pytest.raises(ValueError):
            parse_devices(bad)


@pytest.mark.parametrize(("visible", "cuda"), [(None, 8), ("0", 1), ("2,5", 2), ("", None), ("-1", None)])
def test_a_worker_advertises_the_gpus_cuda_visible_devices_leaves(monkeypatch: pytest.MonkeyPatch,
                                                                  visible: str | None, cuda: int | None) -> None:
    """As a local run counts them (`runner.cases.cuda_devices_here`): NVML sees 8 here, CUDA only those left."""
    from dlperf.hardware import probe

    monkeypatch.setattr(probe, "nvidia_gpus", lambda: ([{"index": i} for i in range(8)], "stand-in NVML"))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert detected_devices().get("cuda") == cuda and detected_devices()["cpu"] == 1


def test_a_case_asks_for_its_device_kind() -> None:
    assert device_kind("cuda:1") == "cuda" and device_kind("cpu") == "cpu"


def test_a_relative_sqlite_path_is_sent_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert shared_url("sqlite:///rel/s.sqlite") == f"sqlite:///{tmp_path / 'rel' / 's.sqlite'}"
    assert shared_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"


@pytest.mark.parametrize("metrics", [None, Metrics(median_s=0.5)])
def test_every_row_says_which_worker_ran_it(metrics: Metrics | None) -> None:
    row = case("k", workload="faults", status="crashed" if metrics is None else "ok", metrics=metrics, env_id=3,
               wall_s=1.0)
    fleet = {"worker": "w1", "address": "tcp://10.0.0.2:4000", "host": "box"}
    out = with_fleet(row, fleet)
    assert out.metrics is not None and out.metrics.model_extra["fleet"] == fleet
    assert out.metrics.median_s == (None if metrics is None else 0.5)
    assert out.env_id == 3


def test_a_case_asks_for_every_gpu_it_uses_and_goes_where_its_framework_is() -> None:
    from dlperf.studies import Case

    ddp = Case("ddp", "torch", "cuda", {"world_size": 4, "workload": "cnn"})
    assert needs(ddp) == {"machine": 1, "cuda": 4}  # a torchrun job: a GPU per rank
    assert needs(Case("ops", "torch", "cuda:2", {})) == {"machine": 1, "cuda": 3}
    assert needs(Case("ops", "torch", "cpu", {})) == {"machine": 1, "cpu": 1}
    one_gpu = {"resources": {"machine": 1, "cpu": 1, "cuda": 1}, "frameworks": {"torch", "numpy"}}
    four = {"resources": {"machine": 1, "cuda": 4}, "frameworks": {"numpy"}}
    assert not offers(one_gpu, ddp) and not offers(four, ddp)  # too few GPUs; no torch
    assert offers(four | {"frameworks": {"torch"}}, ddp)
    assert why_none(ddp, [one_gpu]) == "no worker advertises cuda=4"
    assert why_none(ddp, [one_gpu, four]) == "no worker with cuda=4 has torch installed"


@pytest.mark.parametrize("address", ["foo", "http://127.0.0.1:1", "tcp://", "tcp://host"])
def test_a_malformed_scheduler_address_is_refused_before_connecting(address: str) -> None:
    pytest.importorskip("distributed")
    from dlperf.fleet.executor import check_address
    from dlperf.fleet.tasks import FleetError

    with pytest.raises(FleetError, match="not a Dask scheduler address|no host or port"):
        check_address(address)
    check_address("tcp://127.0.0.1:8786")
    check_address("tls://10.0.0.2:8786")


def test_a_case_sent_again_after_it_was_stored_is_not_run_again(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A case resent after its worker died (the client never heard back) but already stored is reported
    `already` without running; another repetition of it is run."""
    from types import SimpleNamespace

    import dlperf.runner.sweep as sweep
    from dlperf.core.settings import RunSettings
    from dlperf.fleet import tasks
    from dlperf.store import Store
    from dlperf.studies import Case
    from tests.store.test_store import make_run, result_row

    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    store = Store(url)
    run_id = make_run(store)
    store.add_result(result_row(run_id, key="ops/numpy/cpu/n=1", rep=0))
    monkeypatch.setattr(tasks, "fleet_state", lambda: (SimpleNamespace(name="w1"), tasks.FleetState()))

    class Ran(Exception):
        pass

    def run_case(*args, **kwargs):
        raise Ran

    monkeypatch.setattr(sweep, "run_case", run_case)

    def job(rep: int) -> tasks.FleetCase:
        case = Case("ops", "numpy", "cpu", {"n": 1}, repetition=rep)
        assert case.key == "ops/numpy/cpu/n=1"
        return tasks.FleetCase(case=case, settings=RunSettings(threads=1), run_id=run_id, lease_token="t",
                               store_url=url, frameworks=("numpy",))

    assert tasks.run_fleet_case(job(0)) == {"stored": False, "already": True, "worker": "w1", "row": None}
    with pytest.raises((Ran, LeaseLostError)):  # repetition 1 is not stored: it goes on (to the lease check here)
        tasks.run_fleet_case(job(1))


def test_a_fleet_case_stores_the_canary_of_the_machine_that_ran_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker times the canary just before and after the case's process, names its machine in both, and
    stores them with the row (a local sweep does the same without the name)."""
    import socket
    from types import SimpleNamespace

    import dlperf.runner.sweep as sweep
    from dlperf.core.settings import RunSettings
    from dlperf.fleet import tasks
    from dlperf.runner.canary import CanaryTime, run_series
    from dlperf.store import Store, leases
    from dlperf.studies import Case
    from tests.store.test_store import make_run, result_row

    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    store = Store(url)
    run_id = make_run(store)
    assert leases.acquire(store.engine, run_id, leases.Owner.me(), "t") is None
    state = tasks.FleetState()
    monkeypatch.setattr(tasks, "fleet_state", lambda: (SimpleNamespace(name="w1", address="tcp://x:1"), state))
    monkeypatch.setattr(tasks.FleetState, "env_id", lambda self, *args: 1)
    timed: list[str] = []
    real_canary = tasks.FleetState.canary

    def canary(self: tasks.FleetState) -> CanaryTime:
        timed.append("canary")
        return real_canary(self)

    monkeypatch.setattr(tasks.FleetState, "canary", canary)

    def run_case(case: Case, *args: object, **kwargs: object):
        timed.append("case")
        return result_row(run_id, key=case.key, rep=case.repetition)

    monkeypatch.setattr(sweep, "run_case", run_case)
    case = Case("ops", "numpy", "cpu", {"n": 1}, repetition=0)
    out = tasks.run_fleet_case(tasks.FleetCase(case=case, settings=RunSettings(threads=1), run_id=run_id,
                                               lease_token="t", store_url=url, frameworks=("numpy",)))
    assert out["stored"] and timed == ["canary", "case", "canary"]
    series = run_series(store.results(run_id))
    assert len(series) == 2 and {c.host for c in series} == {socket.gethostname()}
    assert all(c.time_s > 0 for c in series) and series[0].at < series[1].at
    store.engine.dispose()
