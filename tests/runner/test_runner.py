"""The runner: each way a case can end gets its status and reason, and the sweep goes on."""

from __future__ import annotations

import signal

import pytest

from dlperf.runner.process import classify_exit, oom_kill_count
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.studies import load_study
from tests.conftest import STUDIES


@pytest.fixture(scope="module")
def faults_results(tmp_path_factory):
    db = tmp_path_factory.mktemp("faults") / "r.sqlite"
    store = Store(db)
    study = load_study(str(STUDIES / "faults.yaml"))
    summary = run_study(study, store)
    rows = store.results(summary.run_id)
    return {(_mode(r.params), r.device): r for r in rows}, store, summary


def _mode(params):
    if params["mode"] != "suspect":
        return params["mode"]
    return f"suspect-{params['need_mb']}" + ("-signal" if params["fail_as"] == "signal" else "")


def test_every_case_is_recorded(faults_results):
    rows, store, summary = faults_results
    assert len(rows) == 18  # 9 cases x {cpu, cuda}
    assert store.run(summary.run_id).status == "complete"


def test_ok_case_has_samples_and_metrics(faults_results):
    r = faults_results[0][("ok", "cpu")]
    assert r.status == "ok" and r.reason is None
    assert len(r.measurement["sample_times_s"]) >= 6
    assert r.m.median_s > 0 and r.m.peak_rss_bytes > 0


def test_raise_is_error_with_the_exception(faults_results):
    r = faults_results[0][("raise", "cpu")]
    assert r.status == "error"
    assert r.reason == "ValueError: deliberate failure from the faults workload"
    assert "Traceback" in r.m.traceback


def test_sleep_past_timeout_is_timeout(faults_results):
    r = faults_results[0][("sleep", "cpu")]
    assert r.status == "timeout"
    assert "8 s time-out" in r.reason
    assert 8 <= r.wall_s < 30


def test_signal_is_crashed(faults_results):
    r = faults_results[0][("signal", "cpu")]
    assert r.status == "crashed"
    assert "SIGSEGV" in r.reason


def test_exit_without_result_is_error(faults_results):
    r = faults_results[0][("exit", "cpu")]
    assert r.status == "error"
    assert "exited with code 3 without a result" in r.reason


def test_alloc_until_failure_is_oom(faults_results):
    r = faults_results[0][("alloc", "cpu")]
    assert r.status == "oom"
    assert "MemoryError" in r.reason
    # The 1 GiB cap is on the data segment (RLIMIT_DATA); RSS also counts shared libraries
    # file pages, so it may pass the cap a little, but the cap, not the 24 GiB machine, stopped it.
    assert 512 * 2**20 <= r.m.peak_rss_bytes <= 1.25 * 1024 * 2**20


def test_suspect_error_that_runs_with_the_cap_raised_is_oom(faults_results):
    # oneDNN's "could not create a primitive" can be a failed allocation or not; the worker
    # runs the step again with the cap raised, and the 1.5 GiB need then fits.
    r = faults_results[0][("suspect-1536", "cpu")]
    assert r.status == "oom"
    assert r.reason.startswith("RuntimeError: could not create a primitive")
    check = r.m.oom_recheck
    assert check["status"] == "ok" and 1536 < check["cap_mb"] <= 4096 and check["peak_rss_bytes"] > 0
    assert f"ran in a fresh worker with the cap raised to {check['cap_mb']} MiB" in r.reason
    assert "1024 MiB cap caused it" in r.reason


def test_suspect_error_that_fails_again_with_the_cap_raised_is_error(faults_results):
    r = faults_results[0][("suspect-100000000", "cpu")]
    assert r.status == "error"
    assert "failed again in a fresh worker with the cap raised to" in r.reason
    assert "not the 1024 MiB cap" in r.reason and r.m.oom_recheck["status"] == "error"


def test_crash_under_a_cap_is_rechecked(faults_results):
    # A SIGSEGV from a failed allocation: the fresh worker with the raised cap runs, so it was memory.
    r = faults_results[0][("suspect-1536-signal", "cpu")]
    assert r.status == "oom" and r.reason.startswith("worker killed by SIGSEGV")
    assert "1024 MiB cap caused it" in r.reason
    # A SIGSEGV that happens again with more memory stays a crash.
    r = faults_results[0][("signal", "cpu")]
    assert r.status == "crashed" and r.m.oom_recheck["status"] == "crashed"
    assert "crashed again in a fresh worker" in r.reason


def test_raised_cap_stays_within_half_the_free_memory():
    from dlperf.runner.recheck import raised_cap_mb

    assert raised_cap_mb(1024, available_bytes=64 * 2**30) == 4096
    assert raised_cap_mb(1024, available_bytes=2 * 2**30) == 1024 + 1024
    assert raised_cap_mb(1024, available_bytes=2**20) is None


def test_absent_device_is_unsupported(faults_results):
    for mode in ("ok", "raise", "sleep"):
        r = faults_results[0][(mode, "cuda")]
        assert r.status == "unsupported"
        assert "numpy has no device 'cuda'" in r.reason


def test_rerun_of_complete_study_starts_a_new_run_and_resume_skips(faults_results, tmp_path):
    # A complete run is not resumed; an explicit --resume of it has nothing left to do.
    _, store, summary = faults_results
    study = load_study(str(STUDIES / "faults.yaml"))
    again = run_study(study, store, resume=summary.run_id)
    assert again.run_id == summary.run_id and again.n_skipped == 18 and again.statuses == {}


def test_worker_peak_rss_is_its_own_not_its_parents():
    """ru_maxrss survives exec on Linux: a worker spawned by a big process must not report that size."""
    import numpy as np

    from dlperf.runner.process import run_worker

    ballast = np.ones(1536 * 2**20 // 8)  # this (parent) process now holds 1.5 GiB
    spec = {"mode": "case", "case": {"workload": "faults", "framework": "numpy", "device": "cpu",
                                     "params": {"mode": "ok"}},
            "settings": {"budget_s": 0.05, "min_run_time_s": 0.01}}
    out = run_worker(spec, timeout_s=60)
    assert ballast[-1] == 1.0
    assert out.result["status"] == "ok"
    assert out.result["metrics"]["peak_rss_bytes"] < 512 * 2**20


def test_peak_rss_reads_vmhwm(tmp_path):
    from dlperf.runner.worker import peak_rss_bytes

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100 kB\n")
    assert peak_rss_bytes(status) == 123456 * 1024


def test_classify_exit_signals_and_oom_killer():
    assert classify_exit(-signal.SIGKILL, oom_kills_before=3, oom_kills_after=4, stderr_tail="")["status"] == "oom"
    killed = classify_exit(-signal.SIGKILL, oom_kills_before=3, oom_kills_after=3, stderr_tail="")
    assert killed == {"status": "crashed", "reason": "worker killed by SIGKILL"}
    assert classify_exit(-signal.SIGKILL, oom_kills_before=None, oom_kills_after=None,
                         stderr_tail="x")["status"] == "crashed"
    assert classify_exit(2, oom_kills_before=None, oom_kills_after=None, stderr_tail="boom")["reason"] == (
        "worker exited with code 2 without a result (stderr: boom)")


def test_oom_kill_count_reads_cgroup_events(tmp_path):
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 5\n")
    assert oom_kill_count(events) == 5
    assert oom_kill_count(tmp_path / "missing") is None
