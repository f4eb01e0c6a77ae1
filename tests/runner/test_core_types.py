"""The typed data of the runner: resolved settings with one set of defaults, worker jobs through JSON,
the worker's dispatch, run statuses, and the one run lifecycle that `run` and `maxbatch` share."""

from __future__ import annotations

import typing
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from dlperf.core.jobs import (
    JOB_TYPES,
    CaseJob,
    CaseSpec,
    CeilingsJob,
    CountersJob,
    FingerprintJob,
    Job,
    OneStepJob,
    ProbeJob,
    as_job,
    read_job,
)
from dlperf.core.settings import RunSettings
from dlperf.core.status import CASE_STATUSES, FAILED_STATUSES, RUN_STATUSES
from dlperf.store import Store
from dlperf.studies import load_study
from dlperf.timing import defaults
from tests.conftest import STUDIES

# -- settings ---------------------------------------------------------------------------------------

#: Each key's one default (what the former `studies.schema.DEFAULTS` said, plus what only the runner sets).
ONE_DEFAULT = {
    "devices": ["cpu"], "params": {}, "repetitions": 1, "budget_s": 5.0, "min_run_time_s": 0.2, "timeout_s": 600.0,
    "mem_limit_mb": None, "threads": None, "warmup": 2, "steps": None, "target_rel_ci": 0.02, "seed": 0,
    "exclude": [], "energy": True, "profile": False, "frameworks": [], "energy_estimate_tdp_w": None,
    "per_call": False, "precision_rel": None, "max_processes": None, "precision_budget_s": None,
}


def test_run_settings_have_one_default_for_each_key():
    assert RunSettings().model_dump() == ONE_DEFAULT
    # stored in this key order (the order runs.settings has always had); the TDP only where set
    only_when_set = ("energy_estimate_tdp_w", "per_call", "precision_rel", "max_processes", "precision_budget_s")
    assert list(RunSettings().stored()) == [k for k in ONE_DEFAULT if k not in only_when_set]
    assert RunSettings(energy_estimate_tdp_w=65).stored()["energy_estimate_tdp_w"] == 65.0
    assert RunSettings(per_call=True).stored()["per_call"] is True  # per-call timing too: only where set
    assert RunSettings(precision_rel=0.05).stored()["precision_rel"] == 0.05  # --precision: only where set


def test_measure_takes_its_defaults_from_the_same_place():
    from dataclasses import fields as dc_fields

    from dlperf.timing import TimerConfig

    params = {f.name: f for f in dc_fields(TimerConfig)}
    fields = RunSettings.model_fields
    for arg, key, value in (("warmup", "warmup", defaults.WARMUP), ("min_run_time_s", "min_run_time_s",
                            defaults.MIN_RUN_TIME_S), ("max_time_s", "budget_s", defaults.BUDGET_S),
                            ("target_rel_ci", "target_rel_ci", defaults.TARGET_REL_CI)):
        assert params[arg].default is value and fields[key].default is value, arg


def test_worker_times_with_the_settings_it_is_given():
    from dlperf.runner.worker import _timing
    from dlperf.timing import TimerConfig

    assert _timing(RunSettings()) == TimerConfig(warmup=defaults.WARMUP, min_run_time_s=defaults.MIN_RUN_TIME_S,
                                                 max_time_s=defaults.BUDGET_S, target_rel_ci=defaults.TARGET_REL_CI)
    fixed = _timing(RunSettings(steps=3, warmup=1))
    assert fixed == TimerConfig(warmup=1, block_size=1, min_samples=3, max_samples=3, min_run_time_s=0.0,
                                max_time_s=float("inf"))
    # per-call mode: single calls, the per-call minimum of samples (measure's default), the usual stop rules
    assert _timing(RunSettings(), per_call=True) == replace(_timing(RunSettings()), per_call=True)
    assert _timing(RunSettings(), per_call=True).samples_floor == defaults.PER_CALL_MIN_SAMPLES
    # ... and a study's `steps` still means exactly that many
    assert _timing(RunSettings(steps=3, warmup=1), per_call=True) == replace(fixed, per_call=True)


def test_settings_resolve_file_then_variant_then_overrides(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: ops\nframeworks: [numpy]\nparams: {op: add, size_mb: 0.001}\n"
                    "budget_s: 3\nwarmup: 4\nseed: 7\nquick: {budget_s: 1, warmup: 0}\n")
    full, quick = load_study(str(path)), load_study(str(path), quick=True)
    assert (full.settings.budget_s, full.settings.warmup, full.settings.seed) == (3.0, 4, 7)
    assert (quick.settings.budget_s, quick.settings.warmup, quick.settings.seed) == (1.0, 0, 7)  # variant, file
    assert quick.settings.timeout_s == ONE_DEFAULT["timeout_s"]  # neither says: the default
    over = quick.settings.with_overrides(budget_s=0.5, steps=None, threads=2)
    assert (over.budget_s, over.warmup, over.steps, over.threads) == (0.5, 0, None, 2)  # None overrides nothing
    assert quick.settings.budget_s == 1.0  # frozen: overriding makes a copy
    assert over.with_threads(8).threads == 2 and quick.settings.with_threads(8).threads == 8
    with pytest.raises(ValidationError):
        quick.settings.with_overrides(budget_s=-1)
    with pytest.raises(ValidationError):
        RunSettings(no_such_key=1)


# -- jobs -------------------------------------------------------------------------------------------

CASE = CaseSpec(workload="ops", framework="numpy", device="cpu", params={"op": "add", "size_mb": 0.5})
SETTINGS = RunSettings(frameworks=["numpy"], mem_limit_mb=512, threads=2, steps=3, energy_estimate_tdp_w=65.0)
JOBS = [
    CaseJob(case=CASE, settings=SETTINGS),
    OneStepJob(case=CASE, settings=SETTINGS.with_overrides(mem_limit_mb=2048)),
    CountersJob(case=CASE, settings=SETTINGS, calls=3),
    FingerprintJob(frameworks=["numpy", "torch"], threads=4),
    CeilingsJob(frameworks=["numpy", "torch"], devices=["cpu"], threads=2, quick=True),
    ProbeJob(),
]


@pytest.mark.parametrize("job", JOBS, ids=lambda j: j.mode)
def test_each_job_round_trips_through_json(job):
    sent = job.model_copy(update={"parent_pid": 123, "result_path": "/tmp/r.json"})
    back = read_job(sent.model_dump_json())
    assert type(back) is type(job) and back == sent
    assert as_job(sent.model_dump(mode="json")) == sent  # a plain dict is read as the job it describes


def test_every_mode_has_one_job_type():
    union = typing.get_args(typing.get_args(Job)[0])
    assert set(union) == set(JOB_TYPES) == {type(j) for j in JOBS}
    modes = [t.model_fields["mode"].default for t in JOB_TYPES]
    assert sorted(modes) == sorted(set(modes)) == ["case", "ceilings", "counters", "fingerprint", "one-step", "probe"]
    with pytest.raises(ValidationError):
        read_job('{"mode": "nonsense"}')
    assert JOBS[0].mem_limit_mb == 512 and JOBS[3].mem_limit_mb is None


def test_worker_dispatch_covers_every_job_type():
    from dlperf.runner import worker

    assert set(worker.HANDLERS) == set(JOB_TYPES)
    assert all(callable(h) for h in worker.HANDLERS.values())


# -- statuses ---------------------------------------------------------------------------------------

def test_statuses_and_what_a_retry_runs_again():
    from dlperf.runner import sweep

    assert CASE_STATUSES == ("ok", "error", "timeout", "oom", "crashed", "unsupported")
    assert FAILED_STATUSES == ("error", "timeout", "oom", "crashed") and sweep.FAILED_STATUSES is FAILED_STATUSES
    assert set(RUN_STATUSES) == {"running", "complete", "interrupted", "failed"}


def test_store_refuses_an_unknown_run_status(tmp_path):
    store = Store(tmp_path / "r.sqlite")
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    run_id = store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                              env_id=env_id, n_cases=1, dlperf_version="0")
    for status in RUN_STATUSES:
        store.set_run_status(run_id, status)
        assert store.run(run_id).status == status
    with pytest.raises(ValueError, match="unknown run status 'done'"):
        store.set_run_status(run_id, "done")  # type: ignore[arg-type]
    assert store.run(run_id).status == RUN_STATUSES[-1]


# -- one run lifecycle for `run` and `maxbatch` ----------------------------------------------------

def _no_workers(monkeypatch, module, outcome):
    """`module` fingerprints and runs cases without a worker; `outcome(case)` is a case's (status, reason)
    or raises (KeyboardInterrupt: the user's Ctrl-C)."""
    from dlperf.runner.sweep import result_row

    def run_case(case, settings, run_id, env_id, counters=False):
        status, reason = outcome(case)
        metrics = {"median_s": 1e-3, "iqr_rel": 0.0, "n_samples": 6, "time_per_sample_s": 1e-4,
                   "peak_rss_bytes": 2**20 * case.params.get("batch", 1)}
        return result_row(case, {"status": status, "reason": reason, "metrics": metrics}, run_id, env_id,
                          wall_s=0.0, started=datetime.now(UTC))

    monkeypatch.setattr(module, "collect_fingerprint", lambda names, threads: {"cpu_model": "test"})
    monkeypatch.setattr(module, "run_case", run_case)


def test_sweep_and_maxbatch_share_the_lifecycle():
    from dlperf.runner import lifecycle, maxbatch, sweep

    assert sweep.open_run is lifecycle.open_run and maxbatch.open_run is lifecycle.open_run
    assert sweep.SweepInterrupted is lifecycle.SweepInterrupted


def test_interrupted_sweep_is_marked_interrupted(tmp_path, monkeypatch):

    from dlperf.runner import sweep

    seen = []

    def outcome(case):  # Ctrl-C during the third case of the first sweep
        seen.append(case)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return "ok", None

    _no_workers(monkeypatch, sweep, outcome)
    store = Store(tmp_path / "r.sqlite")
    with pytest.raises(sweep.SweepInterrupted, match=r"^interrupted: 2 of 12 cases of run many_ok-.* are stored; "
                                                     r"rerun the same command to resume$"):
        sweep.run_study(load_study(str(STUDIES / "many_ok.yaml")), store)
    (run,) = store.list_runs(5)
    assert run.status == "interrupted"
    stored_settings = store.run(run.id).settings
    assert stored_settings["threads"] >= 1 and "energy_estimate_tdp_w" not in stored_settings

    again = sweep.run_study(load_study(str(STUDIES / "many_ok.yaml")), store)
    assert again.run_id == run.id and again.resumed and again.n_skipped == 2 and len(seen) == 3 + 10
    assert store.run(run.id).status == "complete"


def _maxbatch(store, **kw):

    from dlperf.runner import maxbatch

    return maxbatch.search(store, maxbatch.resolve_target("lenet5"), framework="torch", device="cpu", mem_limit_mb=600,
                           start=1, max_batch=64, steps=1, **kw)


@pytest.mark.parametrize(("outcome", "status"), [
    (lambda case: ("ok", None) if case.params["batch"] <= 8 else ("oom", "out of memory"), "complete"),
    (lambda case: ("ok", None) if case.params["batch"] <= 2 else ("error", "boom"), "failed"),
], ids=["boundary-found", "stopped"])
def test_maxbatch_run_ends_complete_or_failed(tmp_path, monkeypatch, outcome, status):
    from dlperf.runner import maxbatch

    _no_workers(monkeypatch, maxbatch, outcome)
    store = Store(tmp_path / "r.sqlite")
    result = _maxbatch(store)
    run = store.run(result.run_id)
    assert run.status == status
    # the stored settings are maxbatch's own, as they have always been
    assert run.settings == {"steps": 1, "warmup": 1, "timeout_s": 1800.0, "mem_limit_mb": 600,
                            "threads": run.settings["threads"], "energy": False, "seed": 0}
    assert list(run.settings) == list(maxbatch.STORED_SETTINGS)
    if status == "complete":
        assert (result.largest, result.first_oom, result.stopped) == (8, 9, None)
    else:
        assert result.largest == 2 and result.stopped == "batch 4 ended error: boom"


def test_interrupted_maxbatch_is_marked_interrupted_not_failed(tmp_path, monkeypatch):
    from dlperf.runner import maxbatch

    def outcome(case):
        if case.params["batch"] == 4:
            raise KeyboardInterrupt
        return "ok", None

    _no_workers(monkeypatch, maxbatch, outcome)
    store = Store(tmp_path / "r.sqlite")
    with pytest.raises(KeyboardInterrupt):  # `dlperf maxbatch` prints "dlperf: interrupted", as ever
        _maxbatch(store)
    (run,) = store.list_runs(5)
    assert run.status == "interrupted" and run.n_done == 2


def test_a_sweep_stores_case_results_as_rows(tmp_path):
    """sweep.result_row builds a CaseResult; the store writes it as the row it always wrote."""
    from dlperf.core.result import CaseResult
    from dlperf.runner.sweep import result_row
    from dlperf.studies import Case

    store = Store(tmp_path / "r.sqlite")
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    run_id = store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                              env_id=env_id, n_cases=1, dlperf_version="0")
    case = Case("cnn", "torch", "cpu", {"model": "lenet5", "batch": 4096})
    metrics = {"traceback": "...", "peak_rss_bytes": 123, "oom_recheck": {"cap_mb": 4096, "status": "ok"}}
    row = result_row(case, {"status": "oom", "reason": "MemoryError", "metrics": metrics}, run_id, env_id,
                     wall_s=1.5, started=datetime.now(UTC))
    assert isinstance(row, CaseResult) and row.peak_memory() == (123, "worker peak RSS")
    assert store.add_result(row) and not store.add_result(row)  # stored once, never duplicated
    (stored,) = store.results(run_id)
    assert stored.m.as_dict() == metrics and stored.measurement is None and stored.id >= 1
    assert (stored.case_key, stored.status, stored.reason, stored.wall_s) == (case.key, "oom",
                                                                                          "MemoryError", 1.5)
