"""A failed allocation under the memory cap that does not say MemoryError (issue 31): a worker that cannot import
its framework, or a module its workload needs, under the cap is out of memory, so a maxbatch search takes the
probe for one too large instead of stopping at it. The deaths are recorded ones (stderr as it was) rather than
real tight caps: which of them a cap gives changes from run to run (`runner.alloc_failure`)."""

from __future__ import annotations

from typing import Any

import pytest

from dlperf.core.jobs import CaseJob, CaseSpec
from dlperf.core.settings import RunSettings
from dlperf.frameworks.numpy_fw import NumpyFramework
from dlperf.runner import maxbatch, sweep
from dlperf.runner.alloc_failure import died_allocating, is_allocation_failure
from dlperf.runner.maxbatch import resolve_target
from dlperf.runner.process import WorkerOutcome, classify_exit
from dlperf.runner.worker import run_case
from dlperf.store import Store
from tests.runner.conftest import builds_fail_with
from tests.runner.test_maxbatch import toy  # noqa: F401  (a fixture: the toy workload registered)

#: The last three lines of stderr (joined as `process._stderr_tail` joins them) and the exit code of
#: `python -c "import torch"` (torch 2.13) under RLIMIT_DATA caps of 150-210 MiB on this project's AMD VM, as seen;
#: a cap gives one or another from run to run. Site-packages paths shortened to /v/.
RECORDED_DEATHS = [
    (1, 'File "<frozen importlib._bootstrap>", line 1147, in _find_and_load_unlocked | File "<frozen '
        'importlib._bootstrap>", line 690, in _load_unlocked | SystemError: error return without exception set'),
    (1, 'File "<frozen importlib._bootstrap_external>", line 1069, in get_code | File "<frozen '
        'importlib._bootstrap_external>", line 729, in _compile_bytecode | MemoryError'),
    (127, "cannot allocate memory for thread-local data: ABORT"),
    (1, 'File "/v/torch/_ops.py", line 1208, in _schemas | File "/v/torch/_ops.py", line 1209, in <dictcomp> | '
        "MemoryError: std::bad_alloc"),
    # not seen here: the dynamic loader's words for a shared object it could not map (the issue names it)
    (1, "ImportError: /v/torch/lib/libtorch_cpu.so: failed to map segment from shared object"),
]


@pytest.mark.parametrize(("code", "tail"), RECORDED_DEATHS)
def test_a_worker_that_died_allocating_under_the_cap_is_out_of_memory(code, tail):
    died = classify_exit(code, oom_kills_before=None, oom_kills_after=None, stderr_tail=tail)
    assert died["status"] == "error"  # what the runner took it for
    got = died_allocating(died, 300)
    assert got["status"] == "oom"
    assert tail in got["reason"] and got["reason"].endswith("(a failed allocation under the 300 MiB memory cap)")
    assert died_allocating(died, None) == died  # without a cap, memory is not the cap's: an error as it was


@pytest.mark.parametrize("result", [
    classify_exit(1, oom_kills_before=None, oom_kills_after=None,
                  stderr_tail="ModuleNotFoundError: No module named 'torch'"),
    classify_exit(1, oom_kills_before=None, oom_kills_after=None, stderr_tail=""),
    {"status": "error", "reason": "ValueError: the model said no (MemoryError is its class's name)"},
    {"status": "timeout", "reason": "no result within the 60 s time-out; worker killed"},
])
def test_other_failures_under_the_cap_stay_what_they_were(result):
    assert died_allocating(result, 300) == result


@pytest.mark.parametrize(("exc", "allocation"), [
    (MemoryError(), True),
    (SystemError("error return without exception set"), True),
    (ImportError("libgomp.so.1: failed to map segment from shared object"), True),
    (OSError(12, "Cannot allocate memory"), True),
    (RuntimeError("std::bad_alloc"), False),  # a framework's own words for it are its is_oom's to judge
    (ImportError("No module named 'transformers'"), False),
    (SystemError("some other bug"), False),
])
def test_which_exceptions_are_failed_allocations(exc, allocation):
    assert is_allocation_failure(exc) is allocation


def _job(cap_mb: int | None) -> CaseJob:
    return CaseJob(case=CaseSpec(workload="ops", framework="numpy", device="cpu",
                                 params={"op": "add", "size_mb": 0.001}),
                   settings=RunSettings(frameworks=["numpy"], devices=["cpu"], steps=1, mem_limit_mb=cap_mb))


def test_the_worker_says_which_import_failed_and_why(monkeypatch):
    """In the worker: a framework whose import fails as torch's did under a cap is `oom` with the exception's
    line kept; the same failure without a cap is an error; an import failure that names no allocation under a
    cap is an error the parent re-checks with the cap raised (`oom_suspect`)."""
    def fails(error: BaseException):
        def import_module(self) -> Any:
            raise error
        monkeypatch.setattr(NumpyFramework, "import_module", import_module)

    fails(SystemError("error return without exception set"))
    under_cap = run_case(_job(300))
    assert (under_cap["status"], under_cap["reason"]) == (
        "oom", "SystemError: error return without exception set (importing numpy under the 300 MiB memory cap)")
    assert "SystemError" in under_cap["metrics"]["traceback"] and "oom_suspect" not in under_cap
    no_cap = run_case(_job(None))
    assert (no_cap["status"], no_cap["reason"]) == (
        "error", "SystemError: error return without exception set (importing numpy)")
    assert "oom_suspect" not in no_cap
    fails(ImportError("No module named 'numpy.core._multiarray_umath'"))
    broken = run_case(_job(300))
    assert broken["status"] == "error" and broken["oom_suspect"] is True


def test_a_module_the_workload_imports_that_fails_allocating_is_oom(monkeypatch):
    """Past the framework: a workload's build that imports a library (transformers, onnxruntime) under the cap
    and fails mapping it is out of memory, with its words; without a cap it is an error."""
    builds_fail_with(monkeypatch, ImportError("/x/libonnxruntime.so: failed to map segment from shared object"))
    under_cap = run_case(_job(300))
    assert under_cap["status"] == "oom" and "failed to map segment" in under_cap["reason"]
    assert run_case(_job(None))["status"] == "error"


def test_a_search_takes_a_probe_that_died_importing_for_one_too_large(tmp_path, monkeypatch, toy):  # noqa: F811
    """The search (runner.sweep.run_case, its worker replaced by recorded outcomes): probes from 4 up die
    while importing as torch did under the cap; the search bisects to 3 instead of stopping at 4."""
    _, tail = RECORDED_DEATHS[0]
    sizes: list[int] = []

    def run_worker(job: CaseJob, **kwargs: Any) -> WorkerOutcome:
        size = job.case.params["size_mb"]
        sizes.append(size)
        assert job.settings.mem_limit_mb == 300
        if size >= 4:
            return WorkerOutcome(classify_exit(1, oom_kills_before=None, oom_kills_after=None, stderr_tail=tail),
                                 0.5)
        metrics = {"median_s": 1e-3, "iqr_rel": 0.0, "n_samples": 2, "time_per_sample_s": 1e-4,
                   "peak_rss_bytes": 2**20 * 10}
        return WorkerOutcome({"status": "ok", "reason": None, "metrics": metrics}, 0.5)

    monkeypatch.setattr(sweep, "run_worker", run_worker)
    monkeypatch.setattr(maxbatch, "collect_fingerprint", lambda names, threads: {"cpu_model": "test"})
    store = Store(tmp_path / "r.sqlite")
    out = maxbatch.search(store, resolve_target("toy", {}), framework="numpy", device="cpu", mem_limit_mb=300,
                          steps=1, exact=True)
    assert (out.largest, out.first_oom, out.stopped) == (3, 4, None)
    assert sizes == [1, 2, 4, 3]
    died = {r.params["size_mb"]: r for r in store.results(out.run_id) if r.status != "ok"}
    assert list(died) == [4] and died[4].status == "oom"
    assert "SystemError: error return without exception set" in died[4].reason
    assert store.run(out.run_id).status == "complete"
