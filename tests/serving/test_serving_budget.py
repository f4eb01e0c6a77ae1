"""A driven case's time budget counts from when the runner started its worker, never from the age of whatever
process happens to call the step (a test runner, a notebook), which says nothing about any time-out."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlperf.core.jobs import WORKER_STARTED_AT_ENV
from dlperf.core.settings import RunSettings
from dlperf.runner.process import run_worker
from dlperf.serving.plan import DEADLINE_MARGIN_S, Budget


def test_in_a_worker_the_time_already_spent_is_taken_off(monkeypatch):
    monkeypatch.setenv(WORKER_STARTED_AT_ENV, repr(time.time() - 100.0))
    left = Budget(RunSettings(timeout_s=600)).left_s()
    assert left == pytest.approx(600 - 100 - DEADLINE_MARGIN_S, abs=1.0)


def test_outside_a_worker_it_counts_from_now_whatever_the_process_age(monkeypatch):
    # The pytest process may be 590 s old here: that must not leave a 600 s case 0 s (it once did, under xdist).
    monkeypatch.delenv(WORKER_STARTED_AT_ENV, raising=False)
    left = Budget(RunSettings(timeout_s=600)).left_s()
    assert left == pytest.approx(600 - DEADLINE_MARGIN_S, abs=1.0)


def test_a_malformed_start_is_read_as_no_worker(monkeypatch):
    monkeypatch.setenv(WORKER_STARTED_AT_ENV, "yesterday")
    assert Budget(RunSettings(timeout_s=600)).left_s() == pytest.approx(600 - DEADLINE_MARGIN_S, abs=1.0)


def test_no_time_out_is_no_deadline():
    assert Budget(SimpleNamespace(timeout_s=None)).left_s() == math.inf


def test_the_runner_hands_its_worker_the_start_time():
    """The worker's environment carries the time it was started: a stand-in worker writes what it sees as its
    result (`wrap` puts a command in the worker's place, as a profiler does)."""

    def stand_in(argv: list[str], tmpdir: Path) -> list[str]:
        script = ('import json, os, sys; json.dump({"status": "ok", "at": os.environ.get(sys.argv[1])}, '
                  'open(sys.argv[2], "w"))')
        return [sys.executable, "-c", script, WORKER_STARTED_AT_ENV, str(tmpdir / "result.json")]

    before = time.time()
    out = run_worker({"mode": "probe"}, timeout_s=60, wrap=stand_in).result
    after = time.time()
    assert out["status"] == "ok" and out["at"] is not None, out
    assert before <= float(out["at"]) <= after
