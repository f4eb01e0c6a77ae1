"""Many processes, one store, on SQLite and on a real PostgreSQL server: simultaneous first use and
migration, and run leases (taken atomically, refused while the owner lives, taken over when it is gone,
checked before every stored case, given back on every way out)."""

from __future__ import annotations

import contextlib
import multiprocessing
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, func, select, text

from dlperf.errors import ConfigError, LeaseLostError, RunBusyError
from dlperf.runner.lifecycle import (
    OWNER_GONE,
    NewRun,
    SweepInterrupted,
    claim,
    lease_stale_s,
    open_run,
    shown_status,
)
from dlperf.store import Store, leases
from dlperf.store.schema import MIGRATIONS, SCHEMA_VERSION, meta, run_leases
from tests.postgres_server import new_database
from tests.store.test_store import result_row
from tests.v1_database import build_v1, check_migrated

N_PROCESSES = 6


def _open(url: str, barrier, queue) -> None:  # in a spawned process
    barrier.wait()
    try:
        queue.put(("ok", Store(url).schema_version))
    except BaseException as exc:  # reported to the test, which names it
        queue.put((type(exc).__name__, str(exc)[:300]))


def open_at_once(url: str, n: int = N_PROCESSES) -> list[tuple[str, object]]:
    """`n` processes open the store at `url` at the same moment (released by one barrier); what each got.

    They are forked from a fork server that has imported this module (and with it the store's code) but never
    opened a store: each is still a fresh process with its own connections that does the store's whole first use,
    as a spawned one did, without paying the imports again (about 0.5 s of CPU each, 32 processes in this file).
    The server is started once per test process; if another file started it first, the children import what they
    need, as spawned ones do."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(url, barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return outcomes


def meta_rows(url: str) -> list[tuple[str, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(select(meta.c.key, meta.c.value))]
    finally:
        engine.dispose()


def test_many_processes_open_a_new_store_at_once(store_url):
    """Seen before: 'table dlperf_meta already exists' / 'UNIQUE constraint failed' in 2 of 3 tries."""
    assert open_at_once(store_url) == [("ok", SCHEMA_VERSION)] * N_PROCESSES
    assert meta_rows(store_url) == [("schema_version", str(SCHEMA_VERSION))]


def test_many_processes_migrate_a_v1_store_at_once(store_url, tmp_path):
    ids = build_v1(store_url)
    assert open_at_once(store_url) == [("ok", SCHEMA_VERSION)] * N_PROCESSES
    assert meta_rows(store_url) == [("schema_version", str(SCHEMA_VERSION))]
    fresh = f"sqlite:///{tmp_path / 'fresh.sqlite'}" if store_url.startswith("sqlite") else new_database(store_url)
    check_migrated(store_url, ids, fresh)  # merged once, not once per process


def _make_run(store: Store, lease: tuple[leases.Owner, str] | None = None) -> str:
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    return store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                            env_id=env_id, n_cases=2, dlperf_version="0", lease=lease)


def test_a_v2_store_migrates_and_its_running_runs_have_no_owner(store_url):
    """Runs left `running` by a version without leases have no lease row: their owner counts as gone."""
    v2 = Store(store_url, migrations=MIGRATIONS[:2])
    assert v2.schema_version == 2
    run_id = _make_run(v2)
    v2.engine.dispose()
    assert open_at_once(store_url, 4) == [("ok", SCHEMA_VERSION)] * 4
    store = Store(store_url)
    assert store.run(run_id).status == "running" and store.lease(run_id) is None
    (row,) = store.list_runs()
    assert row.lease is None and shown_status(row.status, row.lease) == OWNER_GONE
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(run_leases)).scalar() == 0


# -- leases ----------------------------------------------------------------------------------------------

@pytest.fixture
def sleeper():
    """Another live process on this host (its PID and start time make a live owner)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def _owner(pid: int, host: str | None = None) -> leases.Owner:
    started = leases.process_start_s(pid)
    return leases.Owner(host or leases.host_id(), pid, started if started is not None else 1.0)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_new_run_is_created_with_its_lease(store_url):
    store = Store(store_url)
    me = leases.Owner.me()
    run_id = _make_run(store, (me, "tok"))
    held = store.lease(run_id)
    assert held is not None and held.owner == me and held.token == "tok"
    assert held.gone_reason(lease_stale_s()) is None
    assert shown_status("running", held) == "running"


def test_a_live_owner_is_refused_in_one_line(store_url, sleeper):
    store = Store(store_url)
    run_id = _make_run(store, (_owner(sleeper.pid), "theirs"))
    with pytest.raises(RunBusyError) as err:
        claim(store, run_id, leases.Owner.me(), "mine", 120.0)
    msg = str(err.value)
    assert "\n" not in msg and f"run {run_id} is being executed by pid {sleeper.pid} on {leases.host_id()}" in msg
    assert "since " in msg and re.search(r"last heartbeat \d+ s ago", msg) and "--new" in msg
    assert store.lease(run_id).token == "theirs"  # untouched


@pytest.mark.parametrize("how", ["dead pid", "pid reused", "stale heartbeat elsewhere"])
def test_a_gone_owner_is_taken_over(store_url, sleeper, how):
    store = Store(store_url)
    if how == "dead pid":
        gone, why = _owner(_dead_pid()), "is no longer running"
    elif how == "pid reused":  # the sleeper's PID, but not the process that took the lease
        gone, why = leases.Owner(leases.host_id(), sleeper.pid, 12345.0), "is another process now"
    else:  # another host: its PID cannot be checked from here, only its heartbeat
        gone, why = leases.Owner("elsewhere", sleeper.pid, 1.0), "last heartbeat was 300 s ago"
    run_id = _make_run(store, (gone, "old"))
    if how.startswith("stale"):
        with store.engine.begin() as conn:
            conn.execute(run_leases.update().values(heartbeat_at=datetime.now(UTC) - timedelta(seconds=300)))
        assert store.lease(run_id).gone_reason(600.0) is None  # not stale under a longer limit
    assert shown_status("running", store.lease(run_id), 120.0) == OWNER_GONE
    note = claim(store, run_id, leases.Owner.me(), "new", 120.0)
    assert note is not None and note.startswith(f"taking over run {run_id} from pid {gone.pid}") and why in note
    assert store.lease(run_id).token == "new" and store.lease(run_id).owner == leases.Owner.me()


def test_of_two_takers_exactly_one_wins(store_url):
    """The take-over is a compare-and-swap on the old token: the second taker finds it gone and is refused."""
    store = Store(store_url)
    run_id = _make_run(store, (_owner(_dead_pid()), "old"))
    old = store.lease(run_id)
    me = leases.Owner.me()
    assert leases.take_over(store.engine, old, me, "first") is True
    assert leases.take_over(store.engine, old, me, "second") is False
    assert store.lease(run_id).token == "first"
    assert leases.acquire(store.engine, run_id, me, "third").token == "first"  # taken: the INSERT changes nothing


def test_a_case_is_stored_only_while_the_lease_is_held(store_url):
    store = Store(store_url)
    run_id = _make_run(store, (leases.Owner.me(), "mine"))
    assert store.add_result(result_row(run_id, key="a"), lease_token="mine")
    with store.engine.begin() as conn:  # another process takes the run over
        conn.execute(run_leases.update().values(token="theirs", pid=1))
    with pytest.raises(LeaseLostError, match=f"run {run_id} was taken over by pid 1 on .*stores nothing more"):
        store.add_result(result_row(run_id, key="b"), lease_token="mine")
    assert store.done_cases(run_id) == {("a", 0)}


def _new_run() -> NewRun:
    return NewRun(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={}, env_id=1,
                  n_cases=1)


def test_open_run_gives_the_lease_back_on_every_way_out(store_url):
    store = Store(store_url)
    store.environment_id({"cpu_model": "x"}, "hash-x")
    with open_run(store, _new_run()) as run:
        assert store.lease(run.run_id).owner == leases.Owner.me()
    assert store.lease(run.run_id) is None and store.run(run.run_id).status == "complete"
    with pytest.raises(KeyboardInterrupt), open_run(store, _new_run(), resume_id=run.run_id) as again:
        raise KeyboardInterrupt
    assert store.lease(again.run_id) is None and store.run(again.run_id).status == "interrupted"
    with pytest.raises(ZeroDivisionError), open_run(store, _new_run()) as broken:
        1 / 0  # noqa: B018
    assert store.lease(broken.run_id) is None  # an error in this process: the run is resumable, and says so
    assert shown_status(store.run(broken.run_id).status, None) == "interrupted"


def test_a_run_taken_over_stops_and_leaves_its_status_to_the_new_owner(store_url):
    store = Store(store_url)
    store.environment_id({"cpu_model": "x"}, "hash-x")
    with pytest.raises(LeaseLostError), open_run(store, _new_run()) as run:
        with store.engine.begin() as conn:
            conn.execute(run_leases.update().values(token="theirs"))
        run.store_result(result_row(run.run_id))
    assert store.run(run.run_id).status == "running" and store.lease(run.run_id).token == "theirs"
    assert store.done_cases(run.run_id) == set()


@pytest.mark.parametrize("how", ["ctrl-c", "finishes", "error"])
def test_a_process_that_lost_its_run_never_marks_it(store_url, how):
    """Taken over, then stopped (Ctrl-C), ended normally, or crashed: the new owner's `running` stays."""
    store = Store(store_url)
    store.environment_id({"cpu_model": "x"}, "hash-x")
    raised = {"ctrl-c": SweepInterrupted, "finishes": None, "error": ZeroDivisionError}[how]
    with contextlib.ExitStack() as stack:
        if raised is not None:
            stack.enter_context(pytest.raises(raised))
        run = stack.enter_context(open_run(store, _new_run(), interrupted=lambda run_id: "stopped"))
        with store.engine.begin() as conn:
            conn.execute(run_leases.update().values(token="theirs"))
        if how == "ctrl-c":
            raise KeyboardInterrupt
        if how == "error":
            1 / 0  # noqa: B018
    assert store.run(run.run_id).status == "running" and store.lease(run.run_id).token == "theirs"


def test_an_in_memory_store_opens():
    for url in ("sqlite://", "sqlite:///:memory:"):
        assert Store(url).schema_version == SCHEMA_VERSION


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf"])
def test_the_stale_limit_override_is_checked(monkeypatch, value):
    monkeypatch.setenv("DLPERF_LEASE_STALE_S", value)
    with pytest.raises(ConfigError, match="DLPERF_LEASE_STALE_S="):
        lease_stale_s()


def test_the_stale_limit_override(monkeypatch):
    monkeypatch.delenv("DLPERF_LEASE_STALE_S", raising=False)
    assert lease_stale_s() == 120.0
    monkeypatch.setenv("DLPERF_LEASE_STALE_S", "2.5")
    assert lease_stale_s() == 2.5


def test_a_zombie_owner_is_gone():
    """A killed parent not yet reaped by its own parent is a zombie: it no longer runs."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = datetime.now(UTC) + timedelta(seconds=30)
    while leases.process_start_s(proc.pid) is not None and datetime.now(UTC) < deadline:
        time.sleep(0.01)
    assert leases.process_start_s(proc.pid) is None  # exited, not yet waited for
    proc.wait()


def test_the_heartbeat_moves(store_url, monkeypatch):
    monkeypatch.setenv("DLPERF_LEASE_STALE_S", "4")  # a heartbeat every 1 s; room for a loaded machine
    store = Store(store_url)
    store.environment_id({"cpu_model": "x"}, "hash-x")
    with open_run(store, _new_run()) as run:
        first = store.lease(run.run_id).heartbeat_at
        deadline = time.monotonic() + 3.5
        while store.lease(run.run_id).heartbeat_at == first and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.lease(run.run_id).heartbeat_at > first
        assert shown_status("running", store.lease(run.run_id)) == "running"


def test_sql_of_the_lease_table_is_what_the_migration_creates(tmp_path):
    """The live table and the v2 -> v3 step agree (the migrated and the fresh store have the same columns)."""
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    Store(url, migrations=MIGRATIONS[:2]).engine.dispose()
    Store(url).engine.dispose()
    engine = create_engine(url)
    with engine.connect() as conn:
        cols = [r[1] for r in conn.execute(text("PRAGMA table_info(run_leases)"))]
    engine.dispose()
    assert cols == [c.name for c in run_leases.columns]


def test_a_missing_postgresql_fails_where_it_is_required(monkeypatch):
    """`make test` sets DLPERF_REQUIRE_POSTGRES=1: the PostgreSQL tests then fail, never skip, where no server
    can be started; elsewhere they are skipped with the reason."""
    from tests.postgres_server import _unavailable

    monkeypatch.setenv("DLPERF_REQUIRE_POSTGRES", "1")
    with pytest.raises(pytest.fail.Exception, match="DLPERF_REQUIRE_POSTGRES=1 but initdb is missing"):
        _unavailable("initdb is missing")
    monkeypatch.delenv("DLPERF_REQUIRE_POSTGRES")
    with pytest.raises(pytest.skip.Exception, match="initdb is missing"):
        _unavailable("initdb is missing")


def test_a_host_is_its_name_and_its_pid_namespace(monkeypatch):
    """Two containers with one host name but their own PIDs are two hosts to a lease (a PID is only checked
    where it means the same process)."""
    real_stat = leases.os.stat

    def stat(path, *a, **k):
        if path == "/proc/self/ns/pid":
            return type("St", (), {"st_ino": 4026532999})()
        return real_stat(path, *a, **k)

    monkeypatch.setattr(leases.os, "stat", stat)
    assert leases.host_id() == f"{leases.socket.gethostname()} (pid namespace 4026532999)"
    monkeypatch.setattr(leases.os, "stat", lambda path, *a, **k: type("St", (), {"st_ino": leases.INITIAL_PID_NS})())
    assert leases.host_id() == leases.socket.gethostname()
