"""Run a study: fingerprint, find or create the run, run each missing case in a worker, store it.

Every finished case is committed before the next starts, so an interrupted sweep
(Ctrl-C, SIGTERM, SIGKILL, power loss) loses at most the case in flight, and
rerunning the same command resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dlperf.core.jobs import CaseJob, CaseSpec, FingerprintJob
from dlperf.core.result import CaseResult, Metrics
from dlperf.core.settings import RunSettings
from dlperf.core.status import FAILED_STATUSES
from dlperf.errors import StudyError
from dlperf.frameworks import get_framework
from dlperf.hardware.identity import derived, diff, host_fingerprint, identity, identity_hash
from dlperf.hardware.probe import default_threads
from dlperf.meters.activity import wait_idle
from dlperf.runner.alloc_failure import died_allocating
from dlperf.runner.canary import Canary
from dlperf.runner.cases import filter_cases
from dlperf.runner.ceilings import CEILING_WORKLOADS, measure_run_ceilings
from dlperf.runner.events import RunEvents
from dlperf.runner.executor import CaseBatch, CaseExecutor
from dlperf.runner.lifecycle import NewRun, OpenRun, SweepInterrupted, open_run
from dlperf.runner.oom_series import memory_series, note_oom, oom_boundaries
from dlperf.runner.precision import (
    DEFAULT_MAX_PROCESSES,
    CaseState,
    PrecisionTarget,
    reach_precision,
    stored_precision,
    usable_median,
)
from dlperf.runner.process import run_worker
from dlperf.runner.recheck import is_suspect, settle_suspect
from dlperf.runner.threads import FLEET_WHY, choose_threads, with_wait
from dlperf.runner.threads import SOURCE_KEY as THREADS_SOURCE_KEY
from dlperf.runner.threads import source as threads_source
from dlperf.runner.worker_result import WorkerResult
from dlperf.store import Store
from dlperf.studies import Case, Study

__all__ = ["FAILED_STATUSES", "SweepInterrupted", "SweepSummary", "filter_cases", "run_case", "run_study"]

FINGERPRINT_TIMEOUT_S = 300.0


@dataclass
class SweepSummary:
    run_id: str
    resumed: bool
    n_cases: int
    n_skipped: int
    statuses: dict[str, int] = field(default_factory=dict)
    #: Why some cases were not run (an executor had no machine for them): the run ended interrupted.
    not_run: list[str] = field(default_factory=list)


def collect_fingerprint(framework_names: list[str], threads: int) -> dict[str, Any]:
    """Fingerprint from a worker process (framework imports stay out of this process)."""
    outcome = run_worker(
        FingerprintJob(frameworks=sorted(set(framework_names)), threads=threads),
        timeout_s=FINGERPRINT_TIMEOUT_S,
        threads=threads,
    )
    if outcome.result.get("status") == "ok":
        return outcome.result["fingerprint"]
    # The frameworks' part failed to load: record the host and say why, never guess versions.
    fp = host_fingerprint(threads)
    fp["frameworks"] = {n: {"version": get_framework(n).version, "error": outcome.result.get("reason")}
                        for n in sorted(set(framework_names))}
    return fp


def run_study(
    study: Study,
    store: Store,
    *,
    frameworks: list[str] | None = None,
    devices: list[str] | None = None,
    new: bool = False,
    resume: str | None = None,
    retry_failed: bool = False,
    overrides: dict[str, Any] | None = None,
    counters: bool = False,
    events: RunEvents | None = None,
    wait_idle_s: float | None = None,
    executor: CaseExecutor | None = None,
) -> SweepSummary:
    """Run every case of `study` not yet stored for its run; return what happened.

    With `wait_idle_s`, each case first waits (at most that long) for other processes to leave the CPU.
    Repetitions run interleaved (every case once, then every case again: A B C A B C), each in its own
    fresh worker, so one bad moment hits one repetition of several cases rather than all of one case.
    With `executor` (e.g. `dlperf.fleet.DaskExecutor`) the cases run elsewhere, each stored by the machine that
    ran it under this run's lease; this process still owns the run. Threads not set (study, --threads) are then
    chosen by each worker for its machine, not here.
    """
    events = events or RunEvents()
    frameworks, devices = list(frameworks or []), list(devices or [])
    cases = filter_cases(study, frameworks, devices)
    settings = study.settings.with_overrides(**(overrides or {}))
    filters: dict[str, Any] = {"frameworks": sorted(frameworks), "devices": sorted(devices),
                               "overrides": {k: v for k, v in sorted((overrides or {}).items()) if v is not None}}
    if counters:
        filters["counters"] = True  # a run with counters is not the same run as one without
    if executor is not None:
        filters["executor"] = executor.name  # a fleet run never resumes a local one (nor the reverse)
    if settings.threads is None and executor is None:
        threads, why = choose_threads(store, study, filters, resume=resume, new=new)
        events.threads_chosen(threads, why)
        settings = settings.with_threads(threads)
        how = threads_source("load", why)
    elif settings.threads is None:  # this machine's idle cores say nothing of the workers'
        events.note(f"threads: {FLEET_WHY} (recorded in the environment of each row)")
        how = threads_source("fleet workers", FLEET_WHY)
    elif (overrides or {}).get("threads") is not None:
        how = threads_source("--threads", "given on the command line")
    else:
        how = threads_source("study", "the study file's threads:")
    threads = settings.threads or default_threads()  # (a fleet's: this machine's fingerprint, the run's env)

    fp = collect_fingerprint([c.framework for c in cases], threads)
    env_id = store.environment_id(fp, identity_hash(fp))  # identity only: peaks and commit are the run's

    if resume:
        run_id = store.resolve_run(resume)
        existing = store.run(run_id)
        if (existing.study, existing.variant, existing.study_hash) != (
            study.name, study.variant, study.study_hash
        ):
            raise StudyError(
                f"--resume {resume}: run {run_id} is of study {existing.study} ({existing.variant}), or of "
                f"another version of its file; it cannot be resumed with {study.name} ({study.variant})"
            )
        if existing.env_id != env_id:
            changed = [key for key, _, _ in diff(identity(store.environment(existing.env_id)), identity(fp))]
            raise StudyError(
                f"--resume {resume}: run {run_id} was measured in another environment ({', '.join(changed[:4])} "
                f"differ); results are never merged across environments: start a new run with --new"
            )
        resumed = True
    else:
        found = None if new else store.find_resumable(
            study=study.name, variant=study.variant, study_hash=study.study_hash, filters=filters, env_id=env_id
        )
        resumed = found is not None
        run_id = found
    run_derived = derived(fp) | {THREADS_SOURCE_KEY: how}  # the run's own: never the environment's data
    # the ceilings its roofline is judged against (not for a fleet: they would be this machine's, not the workers')
    if study.workload in CEILING_WORKLOADS and not resumed and executor is None:
        run_derived["ceilings"] = measure_run_ceilings([c.framework for c in cases], [c.device for c in cases],
                                                       threads, quick=study.variant == "quick" or settings.budget_s < 1)
    new_run = NewRun(study=study.name, variant=study.variant, study_hash=study.study_hash, study_path=study.path,
                     filters=filters, settings=settings.stored(), env_id=env_id, n_cases=len(cases),
                     derived=run_derived)

    def interrupted(run_id: str) -> str:
        stored = len(store.done_cases(run_id))
        return (f"interrupted: {stored} of {len(cases)} cases of run {run_id} are stored; "
                f"rerun the same command to resume")

    # The run is owned while it runs: a run another live process executes is refused (one line naming it),
    # one whose owner is gone is taken over (said on the console); each case is stored only while owned.
    with open_run(store, new_run, resume_id=run_id, interrupted=interrupted,
                  on_takeover=events.run_taken_over) as run:
        if retry_failed:
            store.delete_results(run.run_id, FAILED_STATUSES)
        summary = _sweep(cases, settings, store, run, env_id, resumed, counters, study, events, wait_idle_s,
                         executor)
    return summary


def _sweep(cases: list[Case], settings: RunSettings, store: Store, run: OpenRun, env_id: int, resumed: bool,
           counters: bool, study: Study, events: RunEvents, wait_idle_s: float | None = None,
           executor: CaseExecutor | None = None) -> SweepSummary:
    """Run and store every case of `cases` the run lacks, telling `events` of each; stop (LeaseLostError)
    as soon as another process has taken the run over."""
    run_id = run.run_id
    done = store.done_cases(run_id)
    order = sorted(range(len(cases)), key=lambda i: (cases[i].repetition, i))  # A B C A B C
    todo = [cases[i] for i in order if (cases[i].key, cases[i].repetition) not in done]
    summary = SweepSummary(run_id, resumed, len(cases), len(cases) - len(todo))
    events.run_opened(run_id, resumed=resumed, n_cases=len(cases), n_stored=summary.n_skipped,
                      what=f"study {study.name} ({study.variant})")

    if executor is not None:
        _sweep_elsewhere(summary, executor, CaseBatch(
            todo=todo, settings=settings, run=run, frameworks=sorted({c.framework for c in cases}),
            counters=counters, wait_idle_s=wait_idle_s, events=events, not_run=summary.not_run))
        return summary
    target = precision_target(settings)
    stored = store.results(run_id) if todo or target else []
    oom_at = oom_boundaries(stored)
    rounds = _Rounds(store, run, env_id, settings, counters, events, wait_idle_s, summary, oom_at, stored,
                     target, Canary() if todo or target else None)
    with events.cases(len(cases), summary.n_skipped):
        for i, case in enumerate(todo, start=summary.n_skipped + 1):
            rounds.run_one(case, i, len(cases))
        if target is not None:
            rounds.reach(cases, target)
    return summary


class _Rounds:
    """The local sweep's processes: each case in a fresh worker, the canary before the first and after each one
    (both stored in the case's row, `metrics.canary`), the case's precision across its processes so far
    (`metrics.precision`), and with --precision more processes for the cases still too wide (`runner.precision`)."""

    def __init__(self, store: Store, run: OpenRun, env_id: int, settings: RunSettings, counters: bool,
                 events: RunEvents, wait_idle_s: float | None, summary: SweepSummary, oom_at: dict[Any, int],
                 stored: list[CaseResult], target: PrecisionTarget | None, canary: Canary | None) -> None:
        self.store, self.run, self.env_id, self.settings, self.counters = store, run, env_id, settings, counters
        self.events, self.wait_idle_s, self.summary, self.oom_at = events, wait_idle_s, summary, oom_at
        self.target, self.canary = target, canary
        self.before = canary.measure() if canary is not None else None
        self.states: dict[str, CaseState] = {}
        self.wall_s = 0.0  # the wall time of the run's processes (stored and new): the default extra budget
        for r in stored:
            self._count(r)

    def _count(self, row: CaseResult) -> None:
        state = self.states.setdefault(row.case_key, CaseState())
        state.processes = max(state.processes, row.repetition + 1)
        median = usable_median(row)
        if median is not None:
            state.medians_s.append(median)
        self.wall_s += row.wall_s or 0.0

    def run_one(self, case: Case, index: int, total: int, added: bool = False) -> CaseResult:
        """Run (or skip after an OOM) and store one process of `case`; its row."""
        self.run.check_lease()
        row = _skip_after_oom(case, self.oom_at, self.run.run_id, self.env_id)
        if row is None:
            waited = None
            if self.wait_idle_s:
                self.events.waiting(self.wait_idle_s)
                waited = wait_idle(self.wait_idle_s)
            self.events.case_started(index, total, case.key)
            row = run_case(case, self.settings, self.run.run_id, self.env_id, self.counters)
            if waited is not None:
                row = with_wait(row, waited)
            if self.canary is not None and self.before is not None:
                after = self.canary.measure()  # outside the worker, after it exited: never in a timed region
                row = _with_metrics(row, canary={"before": self.before.as_dict(), "after": after.as_dict()})
                self.before = after
        if added:  # reach_precision counts it in its case's state itself: the row stores the state with it
            median, state = usable_median(row), self.states[case.key]
            shown = CaseState(state.medians_s + ([median] if median is not None else []), case.repetition + 1)
            self.wall_s += row.wall_s or 0.0
        else:
            self._count(row)
            shown = self.states[case.key]
        precision = stored_precision(shown, self.target)
        row = _with_metrics(row, precision=precision | ({"added": True} if added else {}))
        note_oom(row, self.oom_at)
        self.run.store_result(row)
        self.summary.statuses[row.status] = self.summary.statuses.get(row.status, 0) + 1
        self.events.case_done(index, total, row)
        return row

    def reach(self, cases: list[Case], target: PrecisionTarget) -> None:
        """More processes for the cases wider than `target` (runner.precision), within its caps."""
        first = {c.key: c for c in reversed(cases)}  # repetition 0 of each case, in the study's order
        order = {c.key: self.states.setdefault(c.key, CaseState()) for c in cases}
        budget_s = target.budget_s if target.budget_s is not None else self.wall_s
        wide = [k for k, s in order.items() if not s.precise(target.rel) and s.processes < target.max_processes]
        if not wide:
            return
        self.events.note(f"precision: {len(wide)} of {len(order)} cases are wider than ±{target.rel * 100:g}% (95% "
                         f"interval of their process medians): more processes, at most {target.max_processes} per "
                         f"case and {budget_s:.0f} s in all")
        done = [self.summary.n_cases]

        def run_more(key: str, repetition: int) -> float | None:
            done[0] += 1
            row = self.run_one(dataclasses.replace(first[key], repetition=repetition), done[0], done[0], added=True)
            return usable_median(row)

        reached = reach_precision(order, run_more, target, budget_s)
        short = [k for k, r in reached.items() if r.stopped != "reached"]
        if short:
            self.events.note(f"precision: {len(reached) - len(short)} of {len(reached)} cases reached "
                             f"±{target.rel * 100:g}%; {len(short)} did not (the repetitions table says how far each "
                             f"got, and whether the cap or the budget stopped it)")


def precision_target(settings: RunSettings) -> PrecisionTarget | None:
    """The --precision policy of these settings (None where none was asked)."""
    if settings.precision_rel is None:
        return None
    return PrecisionTarget(settings.precision_rel, settings.max_processes or DEFAULT_MAX_PROCESSES,
                           settings.precision_budget_s)


def _with_metrics(row: CaseResult, **extra: Any) -> CaseResult:
    """The row with these keys added to its metrics (a row with no metrics, a failed one, is left as it is)."""
    if row.metrics is None:
        return row
    return row.model_copy(update={"metrics": row.metrics.model_copy(update=extra)})


def _sweep_elsewhere(summary: SweepSummary, executor: CaseExecutor, batch: CaseBatch) -> None:
    """The sweep through `executor`: every case the run lacks runs elsewhere. Nothing is skipped after an
    out-of-memory case here: that boundary is one machine's, and this process cannot know which machine a case
    goes to (a row stored here would carry this machine's environment, not the one it was judged on)."""
    run, events, total = batch.run, batch.events, summary.n_cases
    index = summary.n_skipped
    with events.cases(total, summary.n_skipped):
        for row in executor.run_cases(batch):
            index += 1
            summary.statuses[row.status] = summary.statuses.get(row.status, 0) + 1
            events.case_done(index, total, row)
    if batch.not_run:  # the summary's own list: it says why in the run's last lines
        run.status = "interrupted"  # what was not run stays re-runnable: a rerun resumes it


def _skip_after_oom(case: Case, oom_at: dict[Any, int], run_id: str, env_id: int) -> CaseResult | None:
    """An `oom` row, without running, for a case larger than one of its series that ran out of memory."""
    found = memory_series(case.workload, case.framework, case.device, case.params)
    if found is None:
        return None
    series, axis, value = found
    limit = oom_at.get(series)
    if limit is None or value <= limit:
        return None
    now = datetime.now(UTC)
    result: WorkerResult = {"status": "oom", "reason": f"not run: {axis}={limit} of this series ran out of memory",
              "metrics": {"skipped": True, "oom_at": {axis: limit}}}
    return result_row(case, result, run_id, env_id, wall_s=0.0, started=now)


def result_row(case: Case, result: WorkerResult, run_id: str, env_id: int, *, wall_s: float,
               started: datetime) -> CaseResult:
    """The stored result of one case from a worker's result (or a result made without running one)."""
    metrics, measurement = result.get("metrics"), result.get("measurement")
    return CaseResult(
        run_id=run_id,
        case_key=case.key,
        repetition=case.repetition,
        workload=case.workload,
        framework=case.framework,
        device=case.device,
        params=case.params,
        status=result.get("status", "error"),
        reason=result.get("reason"),
        measurement=None if measurement is None else dict(measurement),
        metrics=None if metrics is None else Metrics.model_validate(metrics),
        env_id=env_id,
        wall_s=wall_s,
        started_at=started,
        finished_at=datetime.now(UTC),
    )


def run_case(case: Case, settings: RunSettings, run_id: str, env_id: int, counters: bool = False) -> CaseResult:
    """Run one case in a fresh worker (or record why it cannot run) and return its store row."""
    started = datetime.now(UTC)
    fw = get_framework(case.framework)
    if not fw.available():
        result: WorkerResult = {"status": "unsupported", "reason": f"{fw.name} is not installed ({fw.install_hint})"}
        wall_s = 0.0
    else:
        job = CaseJob(case=CaseSpec(workload=case.workload, framework=case.framework, device=case.device,
                                    params=case.params), settings=settings)
        outcome = run_worker(job, timeout_s=settings.timeout_s, threads=settings.threads)
        result, wall_s = died_allocating(outcome.result, settings.mem_limit_mb), outcome.wall_s
        if is_suspect(result, settings):
            result = settle_suspect(job, result)
        if counters and result.get("status") == "ok":
            from dlperf.runner import counters as counters_mod

            metrics = result.get("metrics")
            assert metrics is not None  # a worker's "ok" case result always has its metrics
            metrics["counters"] = counters_mod.collect(job.case, settings)
    return result_row(case, result, run_id, env_id, wall_s=wall_s, started=started)
