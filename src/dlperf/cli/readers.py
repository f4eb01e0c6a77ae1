"""The store reads behind the reports and the hardware analyses, which take data, never a store: a run's
typed results, everything a study report needs (`ReportData`), every environment a run's results name (a
fleet run's results come from several machines) and each machine's share of a run, the `peaks` runs of a
host, the cnn results that `hw measured` and `recommend` calibrate on."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from dlperf.analysis.machines import MachineShare, pick_share, split_by_machine
from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.hardware.roofline import PeaksRuns, measured_peaks, same_host
from dlperf.report.study import ReportData
from dlperf.store import Store
from dlperf.store.rows import RunRow
from dlperf.untrusted import path_component


def report_data(store: Store, run_ref: str, plot_dir: Path | None) -> ReportData:
    """Everything a study report needs: the run, its environment with the derived figures (peaks, and the
    ceilings measured at its start) it was measured under, its typed results, and, for a run with ops cases
    but no ceilings of its own, the measured peaks of `peaks` runs of the same host that finished before
    it started: a report reads only what existed when its run began, so it never changes afterwards."""
    run_id = store.resolve_run(run_ref)
    run_row, env = store.run(run_id), store.run_environment(run_id)
    results = store.results(run_id)
    stored = (run_row.derived or {}).get("ceilings") or {}
    peaks: tuple[dict[str, dict[str, float]], str | None] = ({}, None)
    if any(r.workload == "ops" for r in results) and not stored.get("devices"):
        peaks = measured_peaks(peaks_runs(store, [env], finished_before=run_row.started_at), env)
    return ReportData(run_row, env, results, plot_dir or Path("reports") / path_component(run_id), peaks)


def result_environments(store: Store, runs: Iterable[RunRow], results: Iterable[CaseResult]
                        ) -> dict[int, Environment]:
    """Every environment these results name, by env id: a run's own as `Store.run_environment` gives it (its
    derived figures laid over), any other (the machine that ran a fleet case, fingerprinted there) as stored."""
    out: dict[int, Environment] = {}
    for run in runs:
        out.setdefault(int(run.env_id), store.run_environment(run.id))
    for r in results:
        if r.env_id not in out:
            out[r.env_id] = store.environment(r.env_id)
    return out


def run_shares(store: Store, run_ref: str) -> tuple[RunRow, list[CaseResult], list[MachineShare]]:
    """A run (row), its typed results in the store's order, and the same results by the machine that ran them
    (`analysis.machines.split_by_machine`)."""
    run_row = store.run(run_ref)
    results = store.results(run_row.id)
    envs = result_environments(store, [run_row], results)
    return run_row, results, split_by_machine(results, envs, int(run_row.env_id), envs[int(run_row.env_id)])


def run_machines(store: Store, data: ReportData) -> list[MachineShare]:
    """A report's run's results by the machine that ran them (its table's machine column)."""
    envs = result_environments(store, [data.run], data.results)
    return split_by_machine(data.results, envs, int(data.run.env_id), data.env)


def machine_reports(store: Store, data: ReportData, shares: list[MachineShare] | None = None
                    ) -> list[tuple[MachineShare, ReportData]]:
    """A run on several machines (a fleet run), one study report's data per machine (`_share_data`), plots in a
    subfolder per machine. [] for a run on one machine: its report is `data` itself, drawn as it always was.
    `shares`: the run's shares (`run_machines`), read here when not given."""
    shares = run_machines(store, data) if shares is None else shares
    if len(shares) < 2:
        return []
    return [(share, _share_data(store, data, share)) for share in shares]


def _share_data(store: Store, data: ReportData, share: MachineShare) -> ReportData:
    """One machine's report data of a run on several: that machine's results and environment
    (`result_environments`: the submitting machine's with the run's derived figures laid over it, as `report_data`
    reads it, and its measured peaks; any other machine's as fingerprinted there, with the measured peaks of that
    host's `peaks` runs where it has ops cases), plots in its own subfolder."""
    env = share.env
    peaks = data.measured_peaks
    if int(data.run.env_id) not in share.env_ids:  # another machine: never the submitting one's peaks
        peaks = ({}, None)
        if any(r.workload == "ops" for r in share.results) and not (env.get("ceilings") or {}).get("devices"):
            peaks = measured_peaks(peaks_runs(store, [env], finished_before=data.run.started_at), env)
    return ReportData(data.run, env, share.results, data.plot_dir / f"machine-{share.machine_id}", peaks)


def split_ref(ref: str) -> tuple[str, str | None]:
    """RUN or RUN@MACHINE as (the run's reference, the machine selector or None)."""
    run_ref, at, selector = ref.rpartition("@")
    return (run_ref, selector) if at else (ref, None)


def share_report(store: Store, ref: str, plot_dir: Path | None) -> ReportData:
    """RUN or RUN@MACHINE as one machine's report data: a run on one machine as `report_data` reads it; one
    machine's share of a run on several (`_share_data`); a plain RUN that ran on several machines, or an
    unknown or ambiguous machine: DlperfError, the one line `compare` gives (`analysis.machines.pick_share`)."""
    run_ref, selector = split_ref(ref)
    data = report_data(store, run_ref, plot_dir)
    shares = run_machines(store, data)
    share = pick_share(shares, selector, str(data.run.id))
    return _share_data(store, data, share) if len(shares) > 1 else data


def peaks_runs(store: Store, hosts: Iterable[Environment], finished_before: datetime | None = None) -> PeaksRuns:
    """The `peaks` runs of any of these environments' hosts (only those finished before `finished_before`,
    where given), newest first, each as (the environment it ran in, its result rows) for
    `hardware.roofline.measured_peaks`."""
    hosts = list(hosts)
    if not hosts:
        return []
    out = []
    for run in store.runs_of_study("peaks"):  # newest first
        if finished_before is not None and (run.finished_at is None or run.finished_at >= finished_before):
            continue
        env = store.run_environment(run.id)
        if any(same_host(env, host) for host in hosts):
            out.append((env, store.results(run.id)))
    return out


def cnn_inputs(store: Store, run_ids: list[str] | None = None
               ) -> tuple[list[CaseResult], dict[str, Environment], PeaksRuns]:
    """What `hardware.measured.cnn_rows` takes: every stored ok `cnn` result (of these runs, or all),
    oldest first; the environment of each of their runs, by run id; the `peaks` runs of their hosts."""
    results = store.results_of_workload("cnn", run_ids)
    envs = {run_id: store.run_environment(run_id) for run_id in dict.fromkeys(r.run_id for r in results)}
    return results, envs, peaks_runs(store, envs.values())


def run_histories(store: Any, datas: list[Any], machines: dict[str, list[Any]] | None = None
                  ) -> dict[str, list[Any]]:
    """For the HTML report, by run id: the run's study's history on each machine the run's results came from
    (`machines`: its `analysis.machines.MachineShare`s by run id; None: read here), one timeline each, every run
    of the study on that machine (a fleet run's share there counts), or [] when no machine of the run has
    another run of it. Each study's runs are read once, their results' environment ids by one query, and
    results only of the runs on the run's machines."""
    from dataclasses import replace

    from dlperf.analysis.history import build_history
    from dlperf.hardware.identity import machine_id
    from dlperf.report.history_report import history_sections

    out: dict[str, list[Any]] = {}
    results: dict[str, list[Any]] = {}
    for study in dict.fromkeys(str(d.run.study) for d in datas):
        runs = store.runs_of_study(study)
        envs = {r.id: store.run_environment(r.id) for r in runs}
        result_envs = {int(r.env_id): envs[r.id] for r in runs}
        touched: dict[str, set[str]] = {}  # run id -> the machines its results came from (its own if none)
        env_ids = _result_env_ids(store, [r.id for r in runs])
        for run in runs:
            for env_id in env_ids.get(run.id, set()) - set(result_envs):
                result_envs[env_id] = store.environment(env_id)
            touched[run.id] = {machine_id(result_envs[e]) for e in env_ids.get(run.id, set())} or {
                machine_id(envs[run.id])}
        for data in (d for d in datas if str(d.run.study) == study):
            shares = (machines or {}).get(data.run.id) or run_machines(store, data)
            mids = {s.machine_id for s in shares}
            mine = [r for r in runs if touched[r.id] & mids]
            for r in mine:
                if r.id not in results:
                    results[r.id] = store.results(r.id)
            hist = build_history(study, mine, envs, {r.id: results[r.id] for r in mine},
                                 result_envs=result_envs)
            kept = [t for t in hist.timelines if t.machine_id in mids and len(t.runs) > 1]
            out[data.run.id] = (history_sections(replace(hist, timelines=kept), plot_dir=data.plot_dir / "history")
                                   if kept else [])
    return out


def _result_env_ids(store: Any, run_ids: list[str]) -> dict[str, set[int]]:
    """The environment ids each run's results name (the machines that ran them), by run id, in one query."""
    from sqlalchemy import select

    from dlperf.store.schema import results

    out: dict[str, set[int]] = {}
    with store.engine.connect() as conn:
        for run_id, env_id in conn.execute(select(results.c.run_id, results.c.env_id).where(
                results.c.run_id.in_(run_ids)).distinct()):
            out.setdefault(str(run_id), set()).add(int(env_id))
    return out
