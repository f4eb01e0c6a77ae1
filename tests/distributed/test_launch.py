"""The torchrun launcher (`dlperf.distributed.launch`): how a job ends, seen through real 2-rank gloo jobs of the
`faults` kind (ranks that misbehave on purpose; each job costs 3-5 s, so each is launched once per module), and
`classify` (`outcome.py`) on made-up inputs (no job)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dlperf.core.jobs import WORKER_STARTED_AT_ENV
from dlperf.core.result import Metrics
from dlperf.core.status import CaseEnded
from dlperf.distributed import launch as launch_mod
from dlperf.distributed import outcome as outcome_mod
from dlperf.distributed.launch import STOPPED, JobOutcome, launch

pytestmark = pytest.mark.timeout(180)


def _job(payload: dict[str, str], timeout_s: float = 60.0) -> JobOutcome:
    return launch("faults", payload, world_size=2, device="cpu", threads_per_rank=1, timeout_s=timeout_s)


def _job_dir(outcome: JobOutcome) -> str:
    """The job's temporary folder (the spec file's), which every process of the job has on its command line."""
    return str(Path(outcome.command[-1]).parent)


def _left_behind(outcome: JobOutcome | str) -> list[int]:
    """Pids of processes still running whose command line names the job's folder (or contains `outcome`)."""
    where = outcome if isinstance(outcome, str) else _job_dir(outcome)
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(where in a for a in proc.info["cmdline"] or ()):
                out.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


@pytest.fixture(scope="module")
def ok() -> JobOutcome:
    return _job({"all": "ok"})


@pytest.fixture(scope="module")
def raised() -> JobOutcome:
    return _job({"rank_1": "raise"})


def test_a_job_whose_ranks_all_return_is_ok(ok):
    assert ok.status == "ok" and ok.reason is None
    assert [r["rank"] for r in ok.ranks] == [0, 1]
    assert all(r["status"] == "ok" and r["sum"] == 2.0 for r in ok.ranks)  # the all-reduce of ones on 2 ranks
    assert ok.world_size == 2 and ok.wall_s > 0 and "--nproc-per-node=2" in ok.command
    ok.raise_for_status()  # ok: nothing raised
    assert not _left_behind(ok)


def test_a_rank_that_raises_ends_the_job_error_with_its_own_reason(raised):
    assert raised.status == "error"
    assert raised.reason == "rank 1: RuntimeError: rank 1 failed on purpose"
    failed = next(r for r in raised.ranks if r["rank"] == 1)
    assert failed["status"] == "error" and "Traceback" in failed["traceback"]
    assert not _left_behind(raised)


def test_raise_for_status_ends_the_case_with_the_jobs_status_and_description(raised):
    with pytest.raises(CaseEnded) as info:
        raised.raise_for_status()
    assert info.value.status == "error" and info.value.reason == raised.reason
    described = info.value.metrics
    assert described["launcher"]["command"] == raised.command and described["launcher"]["world_size"] == 2
    assert {r["rank"] for r in described["ranks"]} >= {1}
    assert next(r for r in described["ranks"] if r["rank"] == 1)["reason"].startswith("RuntimeError")
    # the failing rank's traceback, where `dlperf show --errors` reads a case's (Metrics.traceback)
    assert described["traceback"].startswith("rank 1 of 2:\nTraceback")
    assert "RuntimeError: rank 1 failed on purpose" in described["traceback"]
    assert Metrics.model_validate(described).traceback == described["traceback"]


def test_a_memory_error_is_oom():
    outcome = _job({"rank_0": "oom"})
    assert outcome.status == "oom"
    assert outcome.reason == "rank 0: MemoryError: rank 0 ran out of memory on purpose"


def test_a_killed_rank_is_the_crash_not_its_peers_connection_error():
    outcome = _job({"rank_1": "kill"})
    assert outcome.status == "crashed", outcome.reason
    assert outcome.reason.startswith("rank 1 ended without a result"), outcome.reason
    assert not any(r.get("rank") == 1 for r in outcome.ranks)  # it wrote nothing; rank 0 may have (its error)
    assert not _left_behind(outcome)


def test_a_hang_times_out_and_leaves_no_rank_behind():
    outcome = _job({"rank_1": "sleep"}, timeout_s=8.0)  # rank 0 waits in the all-reduce for rank 1, which sleeps
    assert outcome.status == "timeout", outcome.reason
    assert "within 8 s" in outcome.reason and "stopped" in outcome.reason
    assert outcome.wall_s < 8.0 + 2 * launch_mod.TERM_GRACE_S + 5
    assert not _left_behind(outcome)
    with pytest.raises(CaseEnded) as info:
        outcome.raise_for_status()
    assert info.value.status == "timeout"


def test_a_job_dies_with_the_process_that_launched_it(tmp_path):
    """A worker SIGKILLed by its sweep (an interrupted run, the case's time-out) takes its job with it: torchrun
    runs in its own session, so only its parent-death signal ties it to the worker."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", "from dlperf.distributed.launch import launch; "
         "launch('faults', {'all': 'sleep'}, world_size=2, device='cpu', threads_per_rank=1, timeout_s=120)"],
        env=dict(os.environ, TMPDIR=str(tmp_path)))  # the job's folder lies under tmp_path
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("dlperf-torchrun-*/rank*.pid"))) < 2:  # both ranks started (asleep)
            assert launcher.poll() is None and time.monotonic() < deadline, "the job never started its ranks"
            time.sleep(0.1)
        assert _left_behind(str(tmp_path))  # torchrun and its ranks run
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 5
        while _left_behind(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _left_behind(str(tmp_path))
    finally:
        launcher.kill()
        for pid in _left_behind(str(tmp_path)):  # before the fix: torchrun and the ranks, reparented to init
            os.kill(pid, signal.SIGKILL)


# -- _classify on made-up inputs -------------------------------------------------------------------------------

def _classify(ended="exited", returncode=0, ranks=(), vanished=None, oom_before=None, tail="", stopped_at=None):
    return outcome_mod.classify(ended, returncode, list(ranks), vanished or {}, 2, 30.0, oom_before, tail,
                                stopped_at)


def _rank(rank, status="ok", reason=None, at=100.0):
    return {"rank": rank, "status": status, "reason": reason, "finished_at": at}


def test_classify_all_ok():
    assert _classify(ranks=[_rank(0), _rank(1)]) == ("ok", None)


def test_classify_takes_the_earliest_failure_not_the_peer_that_failed_after_it():
    ranks = [_rank(0, "error", "RuntimeError: Connection reset by peer", at=101.0),
             _rank(1, "oom", "OutOfMemoryError: CUDA out of memory", at=100.0)]
    assert _classify("failed", 1, ranks) == ("oom", "rank 1: OutOfMemoryError: CUDA out of memory")


def test_classify_a_rank_gone_without_result_before_its_peers_error_is_a_crash():
    ranks = [_rank(0, "error", "RuntimeError: Connection closed by peer", at=100.2)]
    status, reason = _classify("failed", 1, ranks, vanished={1: 100.3}, tail="Signal 9")
    assert status == "crashed"  # seen gone 0.1 s after rank 0's error: the poll's slack puts its death first
    assert reason.startswith("rank 1 ended without a result") and "Signal 9" in reason


def test_classify_a_stopped_rank_is_not_the_cause():
    ranks = [_rank(0, STOPPED, "stopped by SIGTERM", at=99.0), _rank(1, "error", "ValueError: bad", at=100.0)]
    assert _classify("failed", 1, ranks) == ("error", "rank 1: ValueError: bad")


def test_classify_timeout_counts_the_ranks_done():
    status, reason = _classify("timeout", None, [_rank(0)])
    assert status == "timeout" and "within 30 s (1 of 2 ranks done)" in reason
    reason = outcome_mod.classify("timeout", None, [], {}, 2, 25.9485, None, "")[1]
    assert "within 25.9 s (0 of 2 ranks done)" in reason  # the job's time-out, as a time is written


def test_remaining_s_is_the_time_out_less_what_the_worker_ran_and_the_margin(monkeypatch):
    used = 100.0  # the runner started this "worker" 100 s ago
    monkeypatch.setenv(WORKER_STARTED_AT_ENV, repr(time.time() - used))
    left = launch_mod.remaining_s(1000.0)
    assert 1000.0 - used - launch_mod.MARGIN_S - 5 <= left <= 1000.0 - used - launch_mod.MARGIN_S
    assert launch_mod.remaining_s(1000.0, margin_s=0.0) == pytest.approx(left + launch_mod.MARGIN_S, abs=5)
    assert launch_mod.remaining_s(used / 2) == 1.0  # spent already: the least a job gets, never negative
    # Outside a case worker (this test process, whatever its age) the time-out counts from now.
    monkeypatch.delenv(WORKER_STARTED_AT_ENV)
    assert launch_mod.remaining_s(1000.0) == pytest.approx(1000.0 - launch_mod.MARGIN_S, abs=1)


def test_classify_a_peer_failing_after_the_time_out_stopped_the_job_is_still_a_timeout():
    # rank 1 hangs; at the time-out (stopped at 104.0) torchrun stops it, and rank 0, waiting for it in an
    # all-reduce, fails with a connection error after that: the stop's doing, not the job's
    ranks = [_rank(0, "error", "RuntimeError: Connection closed by peer", at=104.3), _rank(1, STOPPED, at=104.2)]
    status, reason = _classify("timeout", -15, ranks, stopped_at=104.0)
    assert status == "timeout" and "(0 of 2 ranks done)" in reason
    # a rank that failed before the stop is the cause, time-out or not
    ranks[0] = _rank(0, "oom", "MemoryError: out", at=103.9)
    assert _classify("timeout", -15, ranks, stopped_at=104.0) == ("oom", "rank 0: MemoryError: out")


class _Running:
    """A torchrun that never exits by itself (a hang in its teardown)."""

    pid = 0

    def poll(self):
        return None


def test_a_job_whose_ranks_all_wrote_ok_is_stopped_after_the_grace_and_is_ok(tmp_path, monkeypatch):
    import json

    for r in range(2):
        (tmp_path / f"rank{r}.json").write_text(json.dumps(_rank(r)))
    stops = []
    monkeypatch.setattr(launch_mod, "_stop", lambda proc, base: stops.append(base))
    monkeypatch.setattr(launch_mod, "TERM_GRACE_S", 0.3)
    t0 = time.perf_counter()
    ended, stopped_at = launch_mod._wait(_Running(), tmp_path, 2, t0 + 60, {})
    assert ended == "stopped_after_ok" and stops == [tmp_path]
    assert 0.3 <= time.perf_counter() - t0 < 5 and stopped_at == pytest.approx(time.time(), abs=5)
    assert _classify(ended, -15, [_rank(0), _rank(1)], stopped_at=stopped_at) == ("ok", None)
    # every rank ok at the time-out too: the results are whole, only torchrun's exit was missing
    assert _classify("timeout", -15, [_rank(0), _rank(1)], stopped_at=stopped_at) == ("ok", None)


def test_the_launcher_record_says_it_stopped_a_job_that_ended_ok():
    outcome = JobOutcome("ok", None, [], 2, 1.0, ["torchrun"], note="every rank wrote ok, but ...")
    assert outcome.launcher_record() == {"command": ["torchrun"], "wall_s": 1.0, "note": "every rank wrote ok, but ..."}


def test_classify_missing_results_after_exit_is_a_crash_or_oom_where_the_oom_count_rose(monkeypatch):
    status, reason = _classify("exited", 1, [_rank(0)], tail="exitcode: -9")
    assert status == "crashed" and "rank(s) [1]" in reason and "torchrun exited 1" in reason
    monkeypatch.setattr(outcome_mod, "oom_kills", lambda: 5)
    status, reason = _classify("exited", 1, [_rank(0)], oom_before=4)
    assert status == "oom" and "rank(s) [1]" in reason and "OOM killer" in reason
    status, reason = _classify("failed", 1, [], vanished={0: 100.0}, oom_before=4)
    assert status == "oom" and reason.startswith("rank 0 was killed by the kernel OOM killer")


def test_gc_paused_collects_then_keeps_the_collector_off_and_restores_it():
    import gc

    from dlperf.distributed.rank import gc_paused

    assert gc.isenabled()
    collections = []
    gc.callbacks.append(lambda phase, info: collections.append(phase))
    try:
        with gc_paused():
            assert not gc.isenabled() and "stop" in collections  # collected on the way in
        assert gc.isenabled()
        with pytest.raises(ValueError), gc_paused():
            raise ValueError("a failing step")
        assert gc.isenabled()
        gc.disable()  # off before: stays off
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.callbacks.pop()


def test_the_job_kinds_are_the_workloads_that_run_as_torchrun_jobs() -> None:
    """One list of kinds: RankKind's values are RANK_KINDS' keys, and each workload whose case is a torchrun job
    (`runs_in_own_processes`) is a kind of its own name; `faults` is the launcher's own test kind (its rank
    misbehaves on purpose), not a workload's."""
    from typing import get_args

    from dlperf.distributed.launch import RANK_KINDS, RankKind
    from dlperf.workloads import REGISTRY

    assert set(get_args(RankKind)) == set(RANK_KINDS)
    jobs = {name for name, w in REGISTRY.items() if w.runs_in_own_processes}
    assert jobs == set(RANK_KINDS) - {"faults"} == {"ddp", "collectives"}
