"""A sweep stopped by SIGINT or SIGKILL, then rerun: finished cases are not rerun, nothing lost or duplicated.

The `dlperf run` tests here stop and resume tests/studies/six_ok.yaml, six trivial cases of the faults workload:
interrupting and resuming is the runner's, whatever the workload, and an ops study would add a ceilings measurement
and the roofline's plots to every run without touching the resume path (a whole `dlperf run` on the 2-core VM:
many_ok's twelve cases 10.1 s of CPU, six ops cases 7.6 s, these six 4.2 s). The in-process tests below resume an
ops study, whose run also holds the ceilings measured at its creation (never measured again on a resume), so that
a resumed ops run is still checked to keep them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import STUDIES, run_cli

STUDY = str(STUDIES / "six_ok.yaml")  # six trivial faults cases (the file says why)
N_CASES = 6

#: The same kind of study on the ops workload (six of many_ok's sizes), for the in-process resume tests: an ops run
#: measures ceilings when it is created, and a resume must keep them with the peaks.
OPS_SIX = """name: ops_six
description: six quick ok cases of the ops workload
workload: ops
frameworks: [numpy]
params:
  op: add
  size_mb: [0.001, 0.002, 0.003, 0.004, 0.005, 0.006]
budget_s: 0.05
min_run_time_s: 0.05
target_rel_ci: 0.0001
timeout_s: 60
"""


def ops_study_file(folder: Path) -> str:
    """OPS_SIX written in `folder` (a test's own): its path."""
    path = folder / "ops_six.yaml"
    path.write_text(OPS_SIX)
    return str(path)


def stored(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text("SELECT case_key, started_at FROM results ORDER BY id"))]
    except Exception:
        return []
    finally:
        engine.dispose()


#: Set in the environment of the sweep a test starts: its workers inherit it, so they are told from others'.
TAG = "DLPERF_TEST_SWEEP"


def as_from_a_terminal() -> None:
    """In the sweep's child before exec: SIGINT handled as in a terminal. A test suite started in the background
    by a non-interactive shell (`make test &`) inherits SIGINT ignored, and Python keeps an inherited SIG_IGN, so
    the Ctrl-C these tests send would never reach the sweep."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop_once_stored(proc: subprocess.Popen[str], n_stored: Callable[[], int], sig: int,
                     after_cases: int = 3) -> subprocess.CompletedProcess[str]:
    """Send `sig` to the sweep `proc` once `n_stored()` reaches `after_cases`; what it printed, reaped (a
    SIGKILLed parent leaves no zombie behind)."""
    deadline = time.monotonic() + 180
    while n_stored() < after_cases:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "sweep made no progress"
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def start_and_stop(study: str, db: Path, sig: int, after_cases: int = 3) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DLPERF_DB=str(db), **{TAG: str(db)})
    proc = subprocess.Popen([sys.executable, "-m", "dlperf.cli", "run", study], env=env, preexec_fn=as_from_a_terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return stop_once_stored(proc, lambda: len(stored(db)), sig, after_cases)


def workers_left(db: Path) -> list[str]:
    """Workers of the sweep that this test started (on `db`) still alive, orphans included: those whose
    environment carries its tag. Other tests' and other users' workers on the machine do not count."""
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if "dlperf.runner.worker" in " ".join(p.info["cmdline"] or []) and p.environ().get(TAG) == str(db):
                left.append(f"{p.pid} {' '.join(p.info['cmdline'])}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return left


#: The exit status each stopping signal gives: 128 + its number, as shells expect (Ctrl-C: 130).
CLEAN_STOPS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_interrupted_sweep_resumes_without_loss_or_duplicates(tmp_path, sig):
    db, study = tmp_path / "r.sqlite", STUDY
    stopped = start_and_stop(study, db, sig)
    before = stored(db)
    assert 3 <= len(before) < N_CASES, "the sweep should have stopped partway"
    if sig in CLEAN_STOPS:
        assert stopped.returncode == CLEAN_STOPS[sig], stopped.stderr
        err = stopped.stderr.strip().splitlines()
        assert len(err) == 1 and "interrupted:" in err[0] and "rerun the same command to resume" in err[0]
        assert "Traceback" not in stopped.stderr
        engine = create_engine(f"sqlite:///{db}")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT status FROM runs")).scalar_one() == "interrupted"
        engine.dispose()
    else:
        assert stopped.returncode == -signal.SIGKILL
    time.sleep(0.5)
    assert workers_left(db) == [], "a worker outlived its sweep"

    again = run_cli("run", study, db=db)
    assert again.returncode == 0, again.stderr
    assert "resuming run six_ok-" in again.stdout
    assert f"{len(before)} of {N_CASES} cases already stored" in again.stdout
    after = stored(db)
    keys = [k for k, _ in after]
    assert len(after) == N_CASES and len(set(keys)) == N_CASES  # nothing lost, nothing duplicated
    assert after[: len(before)] == before  # finished cases were not run again (same rows, same start times)


# -- resuming after a change of derived data only: the same environment, the same run -------------------

def _run_ids(db: Path) -> list[str]:
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(text("SELECT id FROM runs"))]
    finally:
        engine.dispose()


@pytest.mark.parametrize("name,value", [("DLPERF_MEM_BW_GBS", "50"), ("DLPERF_CPU_CLOCK_GHZ", "3.1")])
def test_resume_after_a_peaks_override(tmp_path, monkeypatch, name, value):
    """An override changes the peaks, not the environment: `--resume RUN` goes on with the same run, which
    keeps the peaks it was created under."""
    from dlperf.hardware.identity import host_fingerprint
    from dlperf.store import Store

    for var in ("DLPERF_MEM_BW_GBS", "DLPERF_CPU_CLOCK_GHZ", "DLPERF_CPU_FMA_UNITS", "DLPERF_CPU_PEAK_FP32_GFLOPS"):
        monkeypatch.delenv(var, raising=False)
    plain = host_fingerprint(2)["cpu_peaks_theoretical"]
    with monkeypatch.context() as m:
        m.setenv(name, value)
        assert host_fingerprint(2)["cpu_peaks_theoretical"] != plain  # the override does change the peaks
    db, study = tmp_path / "r.sqlite", STUDY
    start_and_stop(study, db, signal.SIGINT)
    before = stored(db)
    assert 3 <= len(before) < N_CASES
    [run_id] = _run_ids(db)
    created_under = Store(db).run_environment(run_id)
    assert created_under["peaks_overrides"] == {}

    again = run_cli("run", study, "--resume", run_id, db=db, env={name: value})
    assert again.returncode == 0, again.stderr
    assert "another environment" not in again.stderr
    assert f"resuming run {run_id}: {len(before)} of {N_CASES} cases already stored" in again.stdout
    after = stored(db)
    assert len(after) == N_CASES and len({k for k, _ in after}) == N_CASES and after[: len(before)] == before
    assert _run_ids(db) == [run_id]
    store = Store(db)
    assert store.run(run_id).status == "complete"
    assert store.run_environment(run_id) == created_under  # the peaks it was created under


@pytest.fixture
def in_process_fingerprint(monkeypatch):
    """The sweep takes its fingerprint in this process (the same `identity.fingerprint` its worker calls),
    so that a monkeypatched catalog or commit reaches it."""
    from dlperf.hardware.identity import fingerprint
    from dlperf.runner import sweep

    monkeypatch.setattr(sweep, "collect_fingerprint", lambda names, threads: fingerprint(names, threads))


FAST = {"budget_s": 0.05, "min_run_time_s": 0.01}


def _interrupted_run(store, monkeypatch, study_path: str, after_cases: int = 3) -> str:
    """A run of the study at `study_path` stopped by Ctrl-C after `after_cases` cases; its id."""

    from dlperf.runner import sweep
    from dlperf.runner.sweep import SweepInterrupted, run_study
    from dlperf.studies import load_study

    real = sweep.run_case
    ran: list[object] = []

    def run_then_stop(*args, **kwargs):
        if len(ran) == after_cases:
            raise KeyboardInterrupt
        ran.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_case", run_then_stop)
    with pytest.raises(SweepInterrupted):
        run_study(load_study(study_path), store, overrides=FAST)
    monkeypatch.setattr(sweep, "run_case", real)
    run = store.run("latest")
    assert run.status == "interrupted" and len(store.done_cases(run.id)) == after_cases
    return run.id


def _edit_catalog(monkeypatch):
    """Add this machine's CPU to the catalog, with figures of its own."""
    from dlperf.hardware import catalog as catalog_mod
    from dlperf.hardware import probe

    entry = catalog_mod.find("xeon-e5620").model_copy(update={
        "id": "edited-cpu", "name": probe.cpu_model(), "aliases": [], "cores": probe.physical_cores(),
        "peak_fp32_tflops": 1.234, "memory_bw_gbs": 77.0})
    shipped = catalog_mod.catalog()
    monkeypatch.setattr(catalog_mod, "catalog", lambda: (*shipped, entry))


def _new_commit(monkeypatch):
    from dlperf.hardware import probe

    monkeypatch.setattr(probe, "git_commit", lambda: "f" * 40)


@pytest.mark.parametrize("change", [_edit_catalog, _new_commit], ids=["catalog edit", "new commit"])
def test_resume_after_a_catalog_edit_or_a_new_commit(tmp_path, monkeypatch, in_process_fingerprint, change):

    from dlperf.hardware.identity import derived, fingerprint
    from dlperf.runner.sweep import run_study
    from dlperf.store import Store
    from dlperf.studies import load_study

    store, study = Store(tmp_path / "r.sqlite"), ops_study_file(tmp_path)
    run_id = _interrupted_run(store, monkeypatch, study)
    created_under = store.run_environment(run_id)
    assert created_under["ceilings"]  # an ops run's, measured at its creation: the resume below must keep them
    unchanged = derived(fingerprint(["numpy"], 2))
    change(monkeypatch)
    assert derived(fingerprint(["numpy"], 2)) != unchanged  # the change does change the derived data

    summary = run_study(load_study(study), store, resume=run_id, overrides=FAST)
    assert (summary.run_id, summary.resumed, summary.n_skipped) == (run_id, True, 3)
    assert len(store.done_cases(run_id)) == N_CASES and store.run(run_id).status == "complete"
    assert [r.id for r in store.list_runs()] == [run_id]
    assert store.run_environment(run_id) == created_under  # the run keeps what it was created under
