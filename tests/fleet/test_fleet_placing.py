"""The client's placing of cases without a cluster: a fake Dask client whose futures the test ends by hand.

One case per worker at a time, the next when one ends; a worker gone sends its case elsewhere (given up after
allowed-failures + 1 deaths); a worker whose task raises FleetError is left out and its case run elsewhere; any
other task error leaves that case unstored (listed) without stopping the others.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dlperf.core.settings import RunSettings
from dlperf.runner.executor import CaseBatch
from dlperf.studies import Case

pytest.importorskip("distributed")


class FakeFuture:
    def __init__(self, case: Case, addr: str) -> None:
        self.case, self.addr, self.status, self._out = case, addr, "pending", None

    def end(self, status: str, out: Any) -> None:
        self.status, self._out = status, out

    def result(self) -> Any:
        return self._out

    def exception(self) -> Any:
        return self._out

    def cancel(self) -> None:
        self.status = "cancelled"


class FakeClient:
    status = "running"

    def __init__(self) -> None:
        self.sent: list[FakeFuture] = []

    def submit(self, fn: Any, job: Any, *, workers: list[str], **_: Any) -> FakeFuture:
        self.sent.append(FakeFuture(job.case, workers[0]))
        return self.sent[-1]

    def cancel(self, futures: list[Any], force: bool = False) -> None:
        for f in futures:
            f.cancel()


def worker(name: str) -> dict[str, Any]:
    return {"name": name, "host": "h-" + name, "resources": {"machine": 1, "cpu": 1}, "frameworks": {"numpy"}}


def setup(n_cases: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, CaseBatch]:
    from dlperf.fleet import executor as mod

    monkeypatch.setattr(mod, "POLL_S", 0.0)
    ex = mod.DaskExecutor("tcp://s:1", "postgresql+psycopg://u@h/db")
    ex.client = FakeClient()
    ex.workers = {"tcp://a:1": worker("a"), "tcp://b:1": worker("b")}
    monkeypatch.setattr(ex, "_refresh", lambda say: ([], []))
    cases = [Case("faults", "numpy", "cpu", {"mode": "ok", "i": i}) for i in range(n_cases)]
    run = SimpleNamespace(run_id="r", lease_token="t", check_lease=lambda: None)
    batch = CaseBatch(todo=cases, settings=RunSettings(), run=run, frameworks=["numpy"])
    return ex, mod._Sweep(ex, batch, list(cases), {}), batch


def test_one_case_per_worker_and_a_dead_or_bad_worker_loses_no_other_case(monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed.scheduler import KilledWorker

    from dlperf.fleet.tasks import FleetError

    ex, sweep, batch = setup(4, monkeypatch)
    sweep.fill()
    assert [(f.case.params["i"], f.addr) for f in ex.client.sent] == [(0, "tcp://a:1"), (1, "tcp://b:1")]
    sweep.fill()
    assert len(ex.client.sent) == 2  # no second case queued on a busy worker
    a0, b1 = ex.client.sent
    a0.end("error", KilledWorker("k", "tcp://a:1", None))  # a died running case 0
    b1.end("error", FleetError("b cannot open the store"))  # b cannot store: left out, case 1 elsewhere
    rows = []
    for future in (a0, b1):
        case, addr = sweep.inflight.pop(future)
        rows.append(sweep.ended(future, case, addr))
    assert rows == [None, None] and "tcp://b:1" not in ex.workers and batch.not_run == []
    sweep.fill()  # a (alive again in this fake) gets case 1 first: both died or refused cases go first
    assert [f.case.params["i"] for f in ex.client.sent[2:]] == [1]
    sweep.inflight.clear()
    ex.client.sent[-1].end("error", RuntimeError("boom"))
    assert sweep.ended(ex.client.sent[-1], ex.client.sent[-1].case, "tcp://a:1") is None
    assert len(batch.not_run) == 1 and "i=1" in batch.not_run[0] and "RuntimeError: boom" in batch.not_run[0]
    assert [c.params["i"] for c in sweep.queue] == [0, 2, 3]  # the rest still to run, the killed one first


def test_a_case_whose_every_worker_died_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    ex, sweep, batch = setup(1, monkeypatch)
    case = sweep.queue.pop()
    for _ in range(sweep.max_deaths):
        sweep.died(case, "tcp://a:1")
    assert len(sweep.queue) == sweep.max_deaths - 1 and len(batch.not_run) == 1
    assert "every worker it was given to died" in batch.not_run[0]


def test_the_case_of_a_worker_gone_goes_to_another(monkeypatch: pytest.MonkeyPatch) -> None:
    ex, sweep, batch = setup(3, monkeypatch)
    sweep.fill()
    a0 = ex.client.sent[0]

    def a_gone(say: Any) -> tuple[list[str], list[str]]:
        del ex.workers["tcp://a:1"]
        return ["tcp://a:1"], []

    monkeypatch.setattr(ex, "_refresh", a_gone)
    sweep.look()
    assert a0.status == "cancelled" and [c.params["i"] for c in sweep.queue] == [0, 2]
    assert [addr for _, addr in sweep.inflight.values()] == ["tcp://b:1"] and batch.not_run == []


class OomExecutor:
    """Stands in for the fleet: 'runs' batch 16384 as oom (storing it as a worker would), leaves the rest
    not run the first time; records what it was given."""

    name = "dask"

    def __init__(self, first: bool) -> None:
        self.first = first
        self.given: list[Case] = []

    def run_cases(self, batch: CaseBatch) -> Any:
        from datetime import UTC, datetime

        from dlperf.runner.sweep import result_row

        self.given = list(batch.todo)
        for case in batch.todo:
            if self.first and case.params["batch"] > 16384:
                batch.not_run.append("no machine")
                continue
            status = "oom" if case.params["batch"] == 16384 else "ok"
            row = result_row(case, {"status": status, "reason": "fake"}, batch.run.run_id, 1, wall_s=0.0,
                             started=datetime.now(UTC))
            batch.run.store_result(row)
            yield row


def test_a_fleet_run_never_skips_after_an_oom_the_client_cannot_place(tmp_path: Any) -> None:
    """The out-of-memory boundary is one machine's: a resumed fleet run sends the larger batch too, rather
    than storing it 'oom, not run' under this machine's environment."""
    from dlperf.runner.sweep import run_study
    from dlperf.store import Store
    from dlperf.studies import load_study
    from tests.conftest import STUDIES

    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = load_study(str(STUDIES / "cnn_oom.yaml"))
    first, again = OomExecutor(first=True), OomExecutor(first=False)
    summary = run_study(study, store, executor=first)
    assert summary.not_run == ["no machine"] and summary.statuses == {"ok": 1, "oom": 1}
    summary = run_study(study, store, executor=again)
    assert summary.resumed and [c.params["batch"] for c in again.given] == [32768]
    rows = store.results(summary.run_id)
    assert sorted((r.params["batch"], r.status) for r in rows) == [(256, "ok"), (16384, "oom"), (32768, "ok")]
    store.engine.dispose()
