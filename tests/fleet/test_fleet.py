"""A fleet end to end: a local Dask scheduler, two `dlperf fleet worker`s (w1, w2) and a real PostgreSQL store.

Every case is stored exactly once with the environment of the worker that ran it (its machine label), also when a
worker is SIGKILLed while it runs a case, and when the client is interrupted and the run resumed. The two workers
run on this one host on purpose (a real fleet has one per machine; the client warns about it, see test below).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import STUDIES, run_cli
from tests.postgres_server import new_database

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

HERE = Path(__file__).parent
SLEEPY = str(HERE / "sleepy.yaml")  # six cases of 1-2 s on cpu
N_CASES = 6


def as_from_a_terminal() -> None:
    """SIGINT as in a terminal (a suite started in the background inherits it ignored); see tests/runner."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Fleet:
    """A scheduler and named workers started by the test, each in its own session (killed as a group)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.workers = tmp, {}
        file = tmp / "scheduler.json"
        # allowed-failures 0: a task the scheduler saw on a dead worker fails at once, so a case that merely
        # waited on a killed worker would come back KilledWorker; the client must run again elsewhere the one
        # that ran there (its own count: the default 3) and never have queued another there
        env = dict(os.environ) | {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
        self.scheduler = self._start(["fleet", "scheduler", "--port", "0", "--scheduler-file", str(file),
                                      "--dashboard-address", ":0"], "scheduler", env)
        deadline = time.monotonic() + 60
        while not file.exists() or not file.read_text().strip():
            assert self.scheduler.poll() is None, (tmp / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]

    def _start(self, args: list[str], log: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(self.tmp / f"{log}.log", "ab") as out:
            return subprocess.Popen([sys.executable, "-m", "dlperf.cli", *args], stdout=out, stderr=subprocess.STDOUT,
                                    env=env or dict(os.environ), start_new_session=True)

    def start_worker(self, label: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "DLPERF_MACHINE_LABEL"}
        self.workers[label] = self._start(["fleet", "worker", "--scheduler", self.address, "--label", label],
                                          label, env)

    def ensure(self, *labels: str) -> None:
        """These workers alive and joined (started again where a test killed one)."""
        from distributed import Client

        for label in labels:
            if label not in self.workers or self.workers[label].poll() is not None:
                self.start_worker(label)
        with Client(self.address, timeout=30, set_as_default=False) as client:
            deadline = time.monotonic() + 60
            while {w["name"] for w in client.scheduler_info(n_workers=-1)["workers"].values()} < set(labels):
                assert time.monotonic() < deadline, "the workers did not join"
                time.sleep(0.2)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def kill_client(self, proc: subprocess.Popen[str]) -> None:
        """A `dlperf run` client the test started: killed if still running (a failed assertion)."""
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)

    def close(self) -> None:
        for proc in [*self.workers.values(), self.scheduler]:
            self.kill(proc)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    pytest.importorskip("distributed")
    cluster = Fleet(tmp_path_factory.mktemp("fleet"))
    try:
        cluster.ensure("w1", "w2")
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def db(postgres_url: str) -> str:
    return new_database(postgres_url)


def start_run(fleet: Fleet, db: str, *extra: str, study: str = SLEEPY) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "DLPERF_MACHINE_LABEL"} | {"COLUMNS": "200"}
    return subprocess.Popen([sys.executable, "-m", "dlperf.cli", "run", study, "--executor", "dask", "--scheduler",
                             fleet.address, "--db", db, *extra], env=env, preexec_fn=as_from_a_terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stored_rows(db: str) -> list[tuple[str, int, str, str | None, str]]:
    """(case_key, repetition, metrics.fleet.worker, the environment's machine_label, run_id) of every row."""
    from dlperf.store import Store

    store = Store(db)
    try:
        out = []
        for run in store.list_runs(100):
            for r in store.results(run.id):
                fleet = (r.metrics.model_extra or {}).get("fleet") if r.metrics else None
                out.append((r.case_key, r.repetition, fleet["worker"] if fleet else "",
                            store.environment(r.env_id).get("machine_label"), r.run_id))
        return out
    finally:
        store.engine.dispose()


class Watch:
    """Which cases a store holds and who ran them, read cheaply while a sweep runs (one engine, one query)."""

    def __init__(self, db: str) -> None:
        from sqlalchemy import create_engine

        self.engine = create_engine(db)

    def rows(self) -> list[tuple[str, str]]:
        """(case_key, metrics.fleet.worker) of every stored row."""
        from sqlalchemy import text

        try:
            with self.engine.connect() as conn:
                found = conn.execute(text("SELECT case_key, metrics FROM results")).all()
        except Exception:  # the tables are not there yet
            return []
        return [(key, ((json.loads(m) if isinstance(m, str) else m or {}).get("fleet") or {}).get("worker", ""))
                for key, m in found]

    def close(self) -> None:
        self.engine.dispose()


def case_running_on(worker: subprocess.Popen[bytes]) -> dict | None:
    """The case (its job's spec) the dlperf worker process of this Dask worker runs now, if any."""
    import psutil

    try:
        children = psutil.Process(worker.pid).children()
    except psutil.NoSuchProcess:
        return None
    for child in children:
        try:
            cmd = child.cmdline()
            if "dlperf.runner.worker" in cmd:
                spec = json.loads(Path(cmd[-1]).read_text())
                if spec.get("case"):
                    return spec["case"]
        except (psutil.Error, OSError, ValueError):
            continue
    return None


def check_each_once_by_its_worker(rows: list[tuple[str, int, str, str | None, str]]) -> None:
    keys = [(key, rep) for key, rep, *_ in rows]
    assert len(keys) == N_CASES and len(set(keys)) == N_CASES, rows
    for key, _, worker, label, _ in rows:
        assert worker in ("w1", "w2") and label == worker, (key, worker, label)


def test_every_case_once_with_its_machine_after_a_worker_killed_mid_case_and_a_client_interrupt(
        fleet: Fleet, db: str) -> None:
    """One sweep goes through both accidents (one sweep, not two: each costs seconds): w1 is SIGKILLed while it
    runs its second case, which w2 then runs and stores; the client is interrupted (SIGINT) before the end; the
    rerun resumes the run and stores the rest. Every case is stored once, with the environment of its worker."""
    fleet.ensure("w1", "w2")
    proc, watch = start_run(fleet, db), Watch(db)
    try:
        n_first, run_id = first_sweep(fleet, db, proc, watch)
    finally:
        fleet.kill_client(proc)
    fleet.ensure("w1", "w2")
    again = start_run(fleet, db)
    try:
        out, err = again.communicate(timeout=180)
    finally:
        fleet.kill_client(again)
    assert again.returncode == 0, out + err
    assert f"resuming run {run_id}: {n_first} of {N_CASES} cases already stored" in out
    rows = stored_rows(db)
    check_each_once_by_its_worker(rows)
    assert {r[4] for r in rows} == {run_id}
    assert {r[2] for r in rows} == {"w1", "w2"}
    assert "workers w1, w2 run on one host" in err, err
    from dlperf.store import Store

    store = Store(db)
    run = store.run(run_id)
    assert run.status == "complete" and run.filters["executor"] == "dask"
    assert "machine_label" not in store.environment(run.env_id)  # the run's own: the submitting machine's
    store.engine.dispose()


def first_sweep(fleet: Fleet, db: str, proc: subprocess.Popen[str], watch: Watch) -> tuple[int, str]:
    """w1 killed mid-case (its case rerun by w2, no other case lost with it), then the client interrupted;
    returns (the rows stored, the run id)."""
    deadline, running, w1_stored = time.monotonic() + 120, None, False
    while running is None:  # w1 has stored a case and runs another: kill it then
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "w1 never ran a second case"
        w1_stored = w1_stored or any(worker == "w1" for _, worker in watch.rows())
        running = case_running_on(fleet.workers["w1"]) if w1_stored else None
        time.sleep(0.05)
    fleet.kill(fleet.workers["w1"])  # SIGKILL, its process group: its case's process dies with it
    killed = f"sleep_s={running['params']['sleep_s']}"
    while not any(killed in key for key, _ in watch.rows()):  # Dask sends it to w2
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the killed case was never run again"
        time.sleep(0.1)
    watch.close()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err, out + err
    deadline = time.monotonic() + 30  # the case w2 was running ends (its run's lease is gone), unstored
    while case_running_on(fleet.workers["w2"]):
        assert time.monotonic() < deadline, "a case outlived its client's interrupt"
        time.sleep(0.1)
    first = stored_rows(db)
    assert 2 <= len(first) < N_CASES, first  # at least w1's first case and the one it died in
    assert [r[2] for r in first if killed in r[0]] == ["w2"], (running, first)
    assert "not stored" not in out, out  # no case that never ran on w1 was lost with it
    return len(first), first[0][4]


def test_a_device_no_worker_has_is_not_sent_and_the_run_stays_interrupted(fleet: Fleet, db: str,
                                                                         tmp_path: Path) -> None:
    # no threads: each worker chooses its own
    study = tmp_path / "cpu_and_cuda.yaml"
    study.write_text("name: fleet_cuda\nworkload: faults\nframeworks: [numpy]\ndevices: [cpu, cuda]\n"
                     "params:\n  - {mode: ok}\nbudget_s: 0.02\nmin_run_time_s: 0.01\ntimeout_s: 60\n")
    fleet.ensure("w1", "w2")
    proc = start_run(fleet, db, study=str(study))
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        fleet.kill_client(proc)
    assert proc.returncode != 0, out + err
    assert "1 case(s) not sent: no worker advertises cuda" in out
    errors = [line for line in err.splitlines() if "run on one host" not in line]  # the two workers: see top
    assert len(errors) == 1 and "is interrupted" in errors[0] and "cuda" in errors[0], err
    rows = stored_rows(db)
    assert [r[0].split("/")[2] for r in rows] == ["cpu"]
    from dlperf.store import Store

    store = Store(db)
    run = store.run(rows[0][4])
    assert run.status == "interrupted" and run.settings.get("threads") is None
    row = store.results(run.id)[0]
    chosen = row.metrics.model_extra["fleet"]["threads"]  # the worker chose them, and fingerprinted with them
    assert chosen >= 1 and store.environment(row.env_id)["threads"] == chosen
    store.engine.dispose()


@pytest.mark.parametrize("address, words", [
    ("tcp://127.0.0.1:9", "cannot reach the Dask scheduler at tcp://127.0.0.1:9"),
    ("foo", "--scheduler foo: not a Dask scheduler address"),
    ("http://127.0.0.1:1", "--scheduler http://127.0.0.1:1: not a Dask scheduler address"),
])
def test_a_bad_scheduler_address_is_one_line_and_stores_nothing(address: str, words: str, db: str) -> None:
    pytest.importorskip("distributed")
    result = run_cli("run", SLEEPY, "--executor", "dask", "--scheduler", address, "--db", db,
                     env={"DLPERF_FLEET_CONNECT_S": "2"}, timeout=120)
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and words in result.stderr, result.stderr
    from dlperf.store import Store

    store = Store(db)
    assert store.list_runs() == []
    store.engine.dispose()


@pytest.mark.parametrize("args, words", [
    (["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler ADDR is for --executor dask"),
    (["--executor", "dask"], "--executor dask needs --scheduler"),
])
def test_executor_and_scheduler_go_together(args: list[str], words: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dlperf.cli import cli

    result = CliRunner().invoke(cli, ["run", str(STUDIES / "many_ok.yaml"), *args, "--db", str(tmp_path / "s")])
    assert result.exit_code == 2 and words in result.output, result.output
    assert not (tmp_path / "s").exists()
