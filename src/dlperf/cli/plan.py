"""`dlperf plan STUDY`: what `dlperf run STUDY` would run (its cases after the filters, their count) and an
estimate of how long, from the wall times stored for the same cases on this machine. Read-only: it never
creates a store and never starts a worker.

The estimate is labelled as one everywhere: a case's estimate is the median wall time (worker start to
result, the framework's import included) of its stored repetitions measured on this host under the same
timing settings; a case with none has no estimate, and the time-outs give a bound, never a guess.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import socket
import statistics
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, TypedDict

import click

from dlperf.cli.options import (
    FiniteFloatRange,
    db_option,
    new_console,
    open_store,
    refuse_steps_with_budget,
    study_selection,
)

#: `dlperf run` refuses a study (after its filters) of more case-repetitions than this unless told
#: `--max-cases N`: each one is a worker process, so 5,000 is already hours at a second each.
RUN_CASE_LIMIT = 5_000
#: `dlperf plan` counts a study's case-repetitions exactly up to this many, then says "more than".
PLAN_COUNT_CAP = 100_000
#: Rows listed at each end of a long plan (all of them with --all).
HEAD_ROWS = 10
#: Stored runs count towards a case's estimate only when they timed it with these settings as the plan's
#: (threads only where the study sets them: otherwise a run picks them when it starts).
TIMING_KEYS = ("budget_s", "min_run_time_s", "steps", "warmup", "target_rel_ci", "profile", "mem_limit_mb",
               "threads")


@dataclass
class StoredTimes:
    """Wall times stored for the study's cases: usable ones (this host, same timing settings) by case key,
    and the keys timed only on other hosts or under other settings; `missing` says why there are none."""

    by_key: dict[str, list[float]] = field(default_factory=dict)
    elsewhere: set[str] = field(default_factory=set)
    missing: str | None = None


class HostKey(TypedDict):
    """What makes a stored time this host's: the fingerprint's fields that need no measurement."""

    cpu_model: str | None
    cpu_physical_cores: int | None
    hostname_sha256: str | None
    gpus: list[str | None]


class PlanRow(TypedDict):
    """One case of the plan (`--format json`'s `rows`)."""

    workload: str
    framework: str
    device: str
    params: dict[str, Any]  # the study's params of the case: any value its YAML grid gives
    repetitions: int
    estimate_s_per_repetition: float | None
    stored_repetitions: int


class PlanEstimate(TypedDict):
    """The plan's estimate from stored wall times (labelled as one)."""

    label: str
    seconds: float | None
    case_repetitions_estimated: int
    cases_without_stored_time: int
    cases_timed_only_elsewhere: int
    no_store: str | None


class PlanFilters(TypedDict):
    frameworks: list[str]
    devices: list[str]


class Plan(TypedDict):
    """The plan as plain data: what `--format json` prints and `render` draws."""

    study: str
    variant: str
    workload: str
    path: str
    shipped: bool
    filters: PlanFilters
    case_repetitions: int
    count_exact: bool
    case_repetitions_at_most: int
    cases: int | None
    repetitions: int
    per_framework_device: dict[str, int] | None
    run_limit: int
    rows: list[PlanRow]
    rows_left_out: int
    estimate: PlanEstimate | None
    timeout_s: float
    at_most_s_by_timeouts: float


@click.command()
@study_selection("the study's quick variant")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="worker time-out per case, seconds, as `run --timeout` would set it")
@click.option("--budget", "budget_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="timer budget per case, seconds, as `run --budget` would set it")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="a fixed number of timed calls per case, as `run --steps` would set it")
@click.option("--all", "list_all", is_flag=True, help=f"list every case (default: the first and last {HEAD_ROWS})")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@db_option
def plan(study: str, quick: bool, frameworks: tuple[str, ...], devices: tuple[str, ...], timeout_s: float | None,
         budget_s: float | None, steps: int | None, list_all: bool, fmt: str, db: str | None) -> None:
    """The cases STUDY expands to (after --framework/--device), how many, and an estimate of their time from
    stored results of the same cases on this machine; runs nothing, writes nothing."""
    from dlperf.runner.cases import count_run_cases
    from dlperf.studies import load_study

    refuse_steps_with_budget(steps, budget_s)
    loaded = load_study(study, quick=quick)
    count = count_run_cases(loaded, list(frameworks), list(devices), stop_after=PLAN_COUNT_CAP)
    settings = loaded.settings.with_overrides(timeout_s=timeout_s, budget_s=budget_s, steps=steps)
    stored = stored_times(db, loaded.workload, settings.stored())
    out = plan_data(loaded, count, list(frameworks), list(devices), settings, stored, list_all or fmt == "json")
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
    else:
        render(out)


def stored_times(db: str | None, workload: str, settings: dict[str, Any]) -> StoredTimes:
    """The wall times of `workload`'s stored results, sorted into usable and not (see `StoredTimes`)."""
    from sqlalchemy import select

    from dlperf.errors import NoStoreError
    from dlperf.store.schema import environments, results, runs

    try:
        store = open_store(db, create=False)
    except NoStoreError as exc:
        return StoredTimes(missing=f"no results store at {exc.path}")
    here = _this_host()
    with store.engine.connect() as conn:
        envs = {row.id: row.data or {} for row in conn.execute(select(environments.c.id, environments.c.data))}
        rows = conn.execute(
            select(results.c.case_key, results.c.wall_s, results.c.env_id, runs.c.settings, runs.c.filters)
            .select_from(results.join(runs, results.c.run_id == runs.c.id))
            # a case that ran: not `unsupported` at once, not skipped after an oom (stored with wall_s 0)
            .where(results.c.workload == workload, results.c.wall_s > 0, results.c.status != "unsupported")).all()
    # threads: the study's where it sets them; else a run picks them when it starts (the idle cores), so any
    keys = TIMING_KEYS if settings.get("threads") else tuple(k for k in TIMING_KEYS if k != "threads")
    out = StoredTimes()
    for row in rows:
        same = (_host_of(envs.get(row.env_id, {})) == here and not (row.filters or {}).get("counters")
                and all((row.settings or {}).get(k) == settings.get(k) for k in keys))
        if same:
            out.by_key.setdefault(row.case_key, []).append(float(row.wall_s))
        else:
            out.elsewhere.add(row.case_key)
    if not rows:
        out.missing = f"no {workload} results in {store.url}"
    return out


def _this_host() -> HostKey:
    """This machine as `_host_of` reads a stored fingerprint (the fields `hardware.identity.host_fingerprint`
    records for it that need no measurement; threads and framework versions are the run's, not known yet)."""
    from dlperf.hardware import probe

    gpus, _ = probe.nvidia_gpus()
    return {"cpu_model": probe.cpu_model(), "cpu_physical_cores": probe.physical_cores(),
            "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
            "gpus": [g.get("name") for g in gpus]}


def _host_of(env: dict[str, Any]) -> HostKey:
    return {"cpu_model": env.get("cpu_model"), "cpu_physical_cores": env.get("cpu_physical_cores"),
            "hostname_sha256": env.get("hostname_sha256"), "gpus": [g.get("name") for g in env.get("gpus") or []]}


def plan_data(study: Any, count: Any, frameworks: list[str], devices: list[str], settings: Any,
              stored: StoredTimes, list_all: bool) -> Plan:
    """The plan as plain data (what `--format json` prints): the cases, counts, estimate and time-out bound."""
    from dlperf.studies import shipped_studies

    reps = settings.repetitions
    head: list[PlanRow] = []
    tail: deque[PlanRow] = deque(maxlen=None if list_all else HEAD_ROWS)
    per_pair: Counter[str] = Counter()
    n_cases = n_timed = n_elsewhere = 0
    estimate_s = 0.0
    walk = study.iter_cases(frameworks, devices, repetitions=False)
    for case in walk if count.exact else itertools.islice(walk, HEAD_ROWS):  # too many to walk: the first few
        n_cases += 1
        per_pair[f"{case.framework} {case.device}"] += 1
        times = stored.by_key.get(case.key)
        median_s = statistics.median(times) if times else None
        if median_s is not None:
            n_timed += 1
            estimate_s += median_s * reps
        elif case.key in stored.elsewhere:
            n_elsewhere += 1
        row: PlanRow = {"workload": case.workload, "framework": case.framework, "device": case.device,
                        "params": case.params, "repetitions": reps, "estimate_s_per_repetition": median_s,
                        "stored_repetitions": len(times or [])}
        (head if len(head) < HEAD_ROWS and not list_all else tail).append(row)
    n = count.n
    return {
        "study": study.name, "variant": study.variant, "workload": study.workload, "path": study.path,
        "shipped": study.path == str(shipped_studies().get(study.name)),
        "filters": {"frameworks": frameworks, "devices": devices},
        "case_repetitions": n, "count_exact": count.exact, "case_repetitions_at_most": count.at_most,
        "cases": n_cases if count.exact else None, "repetitions": reps,
        "per_framework_device": dict(per_pair) if count.exact else None,
        "run_limit": RUN_CASE_LIMIT,
        "rows": head + list(tail), "rows_left_out": max(0, n_cases - len(head) - len(tail)),
        "estimate": None if not count.exact else {
            "label": "estimate: the median stored wall time of each case on this machine, same timing settings",
            "seconds": estimate_s if n_timed else None,
            "case_repetitions_estimated": n_timed * reps,
            "cases_without_stored_time": n_cases - n_timed,
            "cases_timed_only_elsewhere": n_elsewhere,
            "no_store": stored.missing,
        },
        "timeout_s": settings.timeout_s,
        "at_most_s_by_timeouts": (n if count.exact else count.at_most) * settings.timeout_s,
    }


def render(out: Plan) -> None:
    """The plan on the terminal: what runs, how many, the estimate (labelled) and the time-out bound."""
    from rich.table import Table

    from dlperf.report.tables import shown

    console = new_console()

    def say(text: str) -> None:
        console.print(shown(text), highlight=False)  # a study's path or names may hold anything

    n, reps = out["case_repetitions"], out["repetitions"]
    say(f"{out['study']} ({out['variant']}): workload {out['workload']}, "
        + ("a study shipped with dlperf" if out["shipped"] else f"from {out['path']}"))
    if out["count_exact"]:
        say(f"{out['cases']:,} case{'s' if out['cases'] != 1 else ''} x {reps} repetition{'s' if reps != 1 else ''}"
            f" = {n:,} case-repetitions (each repetition runs in its own worker process)")
    else:
        say(f"more than {n:,} case-repetitions (at most {out['case_repetitions_at_most']:,}, the grid's product "
            f"before duplicates and excludes; counting stopped there)")
    rows = [[r["workload"], r["framework"], r["device"], _params(r["params"]), str(r["repetitions"]),
             _duration(r.get("estimate_s_per_repetition"))] for r in out["rows"]]
    if out["rows_left_out"]:
        rows.insert(HEAD_ROWS, ["...", "", "", f"{out['rows_left_out']:,} more cases (--all lists them)", "", ""])
    elif not out["count_exact"]:
        rows.append(["...", "", "", "more cases (too many to list)", "", ""])
    table = Table(title="cases", title_justify="left")
    for col in ("workload", "framework", "device", "params"):
        table.add_column(col, justify="left", no_wrap=col != "params")
    for col in ("repetitions", "estimate per repetition"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(shown(c) for c in row))
    console.print(table)
    if out["per_framework_device"]:
        say("cases per framework and device: " + ", ".join(f"{k} {v:,}" for k, v in out["per_framework_device"]
                                                              .items()))
    est = out["estimate"]
    if est is None:
        say("estimate: none (too many cases to look up)")
    elif est["no_store"]:
        say(f"estimate: none, no stored timings ({est['no_store']})")
    else:
        if est["seconds"] is not None:
            say(f"estimate: {_duration(est['seconds'])} in workers for {est['case_repetitions_estimated']:,} of {n:,} "
                f"case-repetitions (the median stored wall time of each case on this machine, same timing settings; "
                f"the run's start-up comes on top)")
        if est["cases_without_stored_time"]:
            other = (f"; {est['cases_timed_only_elsewhere']:,} of them have timings from another machine or other "
                     f"settings, not used" if est["cases_timed_only_elsewhere"] else "")
            k = est["cases_without_stored_time"]
            say(f"estimate: none for {k:,} case{'s' if k != 1 else ''} (no stored time on this machine with these "
                f"settings{other})")
    bound_n = n if out["count_exact"] else out["case_repetitions_at_most"]
    say(f"at most {_duration(out['at_most_s_by_timeouts'])} in workers by the time-outs ({bound_n:,} "
        f"case-repetitions x {out['timeout_s']:g} s each; not an estimate; memory re-checks and start-up come on "
        f"top)")
    if n > out["run_limit"]:
        say(f"over `dlperf run`'s limit of {out['run_limit']:,} case-repetitions: run it with --max-cases N "
            f"(N at least the count)")


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def _duration(t_s: float | None) -> str:
    """Seconds as a person reads a duration: `0.62 s`, `4.0 s`, `42 s`, `12 min`, `3.4 h`, `2.1 days`; `-` for
    None."""
    if t_s is None:
        return "-"
    for unit, scale in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if t_s >= 2 * scale:
            return f"{t_s / scale:.2g} {unit}" if t_s < 10 * scale else f"{t_s / scale:,.0f} {unit}"
    return f"{t_s:.2g} s" if t_s < 1 else f"{t_s:.1f} s" if t_s < 10 else f"{t_s:.0f} s"
