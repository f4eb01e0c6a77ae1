"""`dlperf serve`: models served to MLPerf's LoadGen in its scenarios, as the shipped `serving` study (issue 17).

It runs that study (or its quick variant) through `dlperf run`'s path (`execute.execute_study`: the same checks,
store, progress lines and resume), narrowed and overridden by `serve_select`, then prints one line per case from what
the case stored (`metrics["loadgen"]`, `metrics["server_search"]`): LoadGen's verdict and why, the scenario's
metric, and whether the run was shorter than MLPerf's rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from dlperf.cli.execute import ResumeMismatch, execute_study, results_line
from dlperf.cli.options import FiniteFloatRange, db_option, grouped
from dlperf.cli.run_options import RunOptions
from dlperf.cli.serve_select import SCENARIOS, ScenarioType, check_frameworks, select
from dlperf.errors import StudyError
from dlperf.report.serving_text import verdict_text
from dlperf.serving.settings import MAX_DURATION_S, MAX_LATENCY_MS

if TYPE_CHECKING:
    from dlperf.store.rows import RunRow

STUDY = "serving"
#: The sane ranges of the case parameters set here, checked before any store exists (a value past them would
#: fail only inside a worker): LoadGen takes latencies in whole nanoseconds and query counts as uint64 (signed
#: here, as its Python binding's), and no system serves ten million samples/s or builds batches past 4096.
MIN_LATENCY_MS = 0.001
MAX_QPS = 1e7
MAX_QUERY_COUNT = 2**63 - 1
MAX_BATCH = 4096


@dataclass(frozen=True)
class ServeSelection:
    """What `dlperf serve` narrows the serving study to (models, scenarios) and the case parameters it sets, each
    None where not given (the study's then)."""

    models: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    target_latency_ms: float | None = None
    target_qps: float | None = None
    max_batch: int | None = None
    min_duration_s: float | None = None
    min_query_count: int | None = None

    def case_overrides(self) -> dict[str, float | int | None]:
        """The case parameters given, for `serve_select.select` (None: the study's)."""
        return {"target_latency_ms": self.target_latency_ms, "target_qps": self.target_qps,
                "max_batch": self.max_batch, "min_duration_s": self.min_duration_s,
                "min_query_count": self.min_query_count}


@click.command()
@click.argument("models", nargs=-1, metavar="[MODEL]...")
@click.option("--scenario", "scenarios", type=ScenarioType(), multiple=True,
              help=f"only this scenario (repeatable): {', '.join(SCENARIOS)}")
@click.option("--framework", "frameworks", multiple=True, metavar="NAME",
              help="only this framework or runtime (repeatable): torch, onnxruntime, openvino, tensorflow, ...")
@click.option("--device", "devices", multiple=True, metavar="DEV", help="only this device: cpu, cuda, cuda:N "
              "(repeatable)")
@click.option("--quick", is_flag=True, help="the quick variant: torch and onnxruntime, single-stream and server, "
                                            "small models, durations SHORTENED below MLPerf's rules (labelled so)")
@click.option("--target-latency-ms", type=FiniteFloatRange(min=MIN_LATENCY_MS, max=MAX_LATENCY_MS), default=None,
              help="server: the p99 latency bound; multi-stream: the latency LoadGen expects (replaces the "
                   "study's bound, borrowed from MLPerf's)")
@click.option("--target-qps", type=FiniteFloatRange(min=0, min_open=True, max=MAX_QPS), default=None,
              help="server: offer this rate instead of searching for the highest valid one; offline: the rate "
                   "LoadGen expects")
@click.option("--max-batch", type=click.IntRange(min=1, max=MAX_BATCH), default=None,
              help="most samples per predict call (multi-stream, server, offline)")
@click.option("--min-duration-s", type=FiniteFloatRange(min=0, min_open=True, max=MAX_DURATION_S), default=None,
              help="LoadGen's minimum duration per run (MLPerf: 600; shorter is labelled shortened)")
@click.option("--min-query-count", type=click.IntRange(min=1, max=MAX_QUERY_COUNT), default=None,
              help="LoadGen's minimum queries per run (default: the study's, else MLPerf's)")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads (default: the physical cores other processes leave idle at the start, of those "
                   "this process may use)")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="worker time-out per case, seconds (overrides the study; a server search is several runs)")
@click.option("--new", is_flag=True, help="start a new run even if an unfinished one could be resumed")
@click.option("--resume", metavar="RUN", default=None, help="resume this run id explicitly")
@db_option
@grouped(selection=ServeSelection, options=RunOptions)
def serve(quick: bool, selection: ServeSelection, options: RunOptions) -> None:
    """Serve MODELs (default: the study's) to MLPerf's LoadGen in its scenarios and store its verdicts.

    Runs the shipped `serving` study (`--quick`: its quick variant) narrowed to the models, scenarios, frameworks
    and devices given; a server case without --target-qps searches for the highest rate that meets its latency
    bound. A case parameter set here (--target-latency-ms, --target-qps, --max-batch, --min-duration-s,
    --min-query-count) makes another run, never merged with runs made without it."""
    from dlperf.runner.cases import check_devices
    from dlperf.studies import load_study

    check_frameworks(list(options.frameworks))
    check_devices(list(options.devices))
    loaded = select(load_study(STUDY, quick=quick), models=list(selection.models),
                    scenarios=list(selection.scenarios), frameworks=list(options.frameworks),
                    overrides=selection.case_overrides())
    try:
        store, console, summary = execute_study(STUDY, loaded, options)
    except ResumeMismatch as exc:
        raise StudyError(resume_mismatch(str(options.resume), exc.run_id, exc.existing, quick)) from None
    order = {case.key: i for i, case in enumerate(loaded.cases)}
    rows = sorted(store.results(summary.run_id), key=lambda r: (order.get(r.case_key, len(order)), r.repetition))
    for row in rows:
        console.print(escape(case_line(row)), highlight=False)
    results_line(console, summary.run_id, store.url)
    console.print(f"next: dlperf report {summary.run_id} (latency percentiles, rates, validity per scenario) | "
                  f"dlperf show {summary.run_id}", highlight=False)


def resume_mismatch(resume: str, run_id: str, existing: RunRow, quick: bool) -> str:
    """Why --resume RUN cannot continue that run with these words: another study's run, the other variant, or
    other models, scenarios or case parameters than it started with."""
    if existing.study != STUDY:
        return (f"--resume {resume}: run {run_id} is a run of study {existing.study}, not of dlperf serve's "
                f"{STUDY} study")
    if (existing.variant == "quick") != quick:
        return (f"--resume {resume}: run {run_id} was started {'with' if not quick else 'without'} --quick; give the "
                f"same words as it started with to resume it")
    return (f"--resume {resume}: run {run_id} was started with other models, scenarios or overrides (--target-latency-"
            f"ms, --target-qps, --max-batch, --min-duration-s, --min-query-count) than these; give the same ones to "
            f"resume it, or leave --resume out to run these")


def case_line(row: Any) -> str:
    """One case as `dlperf serve` ends with it: framework, device, model, scenario, then LoadGen's verdict (VALID or
    INVALID and its reasons), the scenario's metric and the search's best rate, or how the case ended."""
    p = row.params or {}
    rep = f" #{row.repetition}" if row.repetition else ""
    what = f"{row.framework} {row.device} {p.get('model', '?')} {p.get('scenario', '?')}{rep}"
    if row.status != "ok":
        return f"{what}: {row.status}: {row.reason or 'no reason stored'}"  # whole: a ConfigError's fix is at its end
    return f"{what}: {verdict_text(row.m)}"
