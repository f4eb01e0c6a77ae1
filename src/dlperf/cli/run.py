"""`dlperf run` and `dlperf peaks`: a study run as the command line says (`RunOptions`), through `execute`'s glue
(`dlperf maxbatch` is in maxbatch.py)."""

from __future__ import annotations

import click

from dlperf.cli.execute import execute_study, print_run
from dlperf.cli.options import FiniteFloatRange, MemorySize, db_option, grouped, study_selection
from dlperf.cli.plan import RUN_CASE_LIMIT
from dlperf.cli.run_options import RunOptions
from dlperf.errors import DlperfError


@click.command()
@study_selection("run the study's quick variant")
@click.option("--new", is_flag=True, help="start a new run even if an unfinished one could be resumed")
@click.option("--resume", metavar="RUN", default=None, help="resume this run id explicitly")
@click.option("--retry-failed", is_flag=True, help="run again the cases that ended in error/timeout/oom/crashed")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="worker time-out per case, seconds (overrides the study)")
@click.option("--mem-limit", "mem_limit_mb", type=MemorySize(), default=None,
              help="memory cap per worker: 2GiB, 512MiB, or MiB as a number (overrides the study)")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads (default: the physical cores other processes leave idle at the start, of those "
                   "this process may use (its CPU affinity, its cgroup's CPU quota); with --executor dask, each "
                   "worker's own)")
@click.option("--wait-idle", "wait_idle_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="before each case, wait up to SECONDS (e.g. 60) for other processes to leave "
                                      "the CPU")
@click.option("--budget", "budget_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="timer budget per case, seconds (overrides the study)")
@click.option("--energy-estimate", type=click.Choice(["tdp"]), default=None,
              help="also store an ESTIMATE of CPU energy: TDP x utilisation (needs --tdp-w); never a measurement")
@click.option("--tdp-w", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="the CPU's TDP in watts, for --energy-estimate tdp")
@click.option("--counters", is_flag=True,
              help="also collect GPU hardware counters with Nsight Compute (ncu) for CUDA cases")
@click.option("--profile", is_flag=True, default=None,
              help="also profile each case: cProfile, and the framework's kernel profiler where dlperf has one "
                   "(torch.profiler, TensorFlow's profiler)")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="a fixed number of timed calls per case instead of the adaptive stop (overrides the study)")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="where cases run: here, or on the Dask workers of --scheduler (see 'dlperf fleet --help')")
@click.option("--scheduler", default=None, metavar="ADDR", help="the Dask scheduler of a fleet, tcp://HOST:PORT")
@click.option("--precision", "precision_pct", type=FiniteFloatRange(min=0, max=100, min_open=True, max_open=True),
              default=None, metavar="PCT",
              help="run more worker processes per case while the 95% interval of its process medians is wider "
                   "than +-PCT% (e.g. 5) or rests on under 3 usable processes, within --max-processes and "
                   "--precision-budget (default: only the study's repetitions)")
@click.option("--max-processes", type=click.IntRange(min=3), default=None, metavar="N",
              help="with --precision: at most N processes per case [default: 10]")
@click.option("--precision-budget", "precision_budget_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="with --precision: at most this much extra time for added processes "
                                      "[default: as long as the planned processes took]")
@click.option("--max-cases", type=click.IntRange(min=1), default=None, metavar="N",
              help=f"run a study of up to N case-repetitions (without it: at most {RUN_CASE_LIMIT:,}; "
                   f"`dlperf plan STUDY` counts them)")
@db_option
@grouped(options=RunOptions)
def run(study: str, quick: bool, options: RunOptions) -> None:
    """Run STUDY (a shipped name such as `smoke`, or a .yaml path); resumes an unfinished run."""
    from dlperf.studies import load_study

    done = execute_study(study, load_study(study, quick=quick), options)
    print_run(done, ["show RUN", "report RUN --format html", "verdicts RUN", "export RUN --format csv"])
    if done.summary.not_run:  # a fleet lacked a machine for some cases: the run is interrupted, those re-runnable
        raise DlperfError(f"run {done.summary.run_id} is interrupted: " + "; ".join(done.summary.not_run))


@click.command()
@click.option("--quick", is_flag=True, help="smaller arrays, numpy and torch only")
@click.option("--framework", "frameworks", multiple=True, metavar="NAME", help="only this framework (repeatable)")
@click.option("--device", "devices", multiple=True, metavar="DEV", help="only this device (repeatable)")
@click.option("--new", is_flag=True, help="measure again even if a peaks run could be resumed")
@db_option
@grouped(options=RunOptions)
def peaks(quick: bool, options: RunOptions) -> None:
    """Theoretical peaks of this machine, and the GEMM FLOP/s and copy/triad bandwidth it achieves (stored)."""
    from dlperf.cli.readers import report_data
    from dlperf.report import peaks_table
    from dlperf.report.sections import render_terminal
    from dlperf.studies import load_study

    store, console, summary = execute_study("peaks", load_study("peaks", quick=quick), options)
    render_terminal(peaks_table.sections(report_data(store, summary.run_id, None)), console)
