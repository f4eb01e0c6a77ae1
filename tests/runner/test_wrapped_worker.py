"""A worker run behind a profiler (ncu forks it: the worker's parent is the profiler, not the sweep).

Found on the first GPU run (results/evidence/nvidia-h200): every `--counters` run ended "worker exited with code
1 without a result" because the worker took its parent not being the sweep for the sweep's death. A shell that
forks its command stands in for ncu here."""

from __future__ import annotations

from pathlib import Path

from dlperf.runner.process import run_worker

CASE = {"mode": "case", "case": {"workload": "faults", "framework": "numpy", "device": "cpu",
                                 "params": {"mode": "ok"}},
        "settings": {"budget_s": 0.05, "min_run_time_s": 0.01}}


def forking_wrapper(argv: list[str], tmpdir: Path) -> list[str]:
    """`sh -c '"$@"; exit $?'`: the shell forks the worker and waits for it, as ncu does (no exec)."""
    log = tmpdir / "profiler.csv"
    return ["/bin/sh", "-c", f'echo "==PROF== wrapping" > {log}; "$@"; exit $?', "sh", *argv]


def test_a_worker_behind_a_forking_profiler_measures():
    out = run_worker(CASE, timeout_s=60, wrap=forking_wrapper).result
    assert out["status"] == "ok", out
    assert out["metrics"]["n_samples"] > 0
    assert out["_tmpdir_files"]["profiler.csv"].startswith("==PROF== wrapping")


def test_a_profiler_that_fails_says_why_in_the_reason():
    def failing(argv: list[str], tmpdir: Path) -> list[str]:
        return ["/bin/sh", "-c", f'echo "==ERROR== Failed to initialize the profiler" > {tmpdir / "ncu.csv"}; '
                                 "exit 1"]

    out = run_worker(CASE, timeout_s=60, wrap=failing).result
    assert out["status"] == "error"
    assert out["reason"] == ("worker exited with code 1 without a result "
                             "(stderr: the profiler's log: ==ERROR== Failed to initialize the profiler)")
