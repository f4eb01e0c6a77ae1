"""`dlperf run`, `dlperf peaks`, `dlperf maxbatch`: the commands that measure (workers, the store)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import click

from dlperf.cli.options import (
    FiniteFloatRange,
    KeyValue,
    MemorySize,
    YamlScalar,
    db_option,
    key_values,
    new_console,
    open_store,
    refuse_steps_with_budget,
    study_selection,
)
from dlperf.cli.plan import RUN_CASE_LIMIT
from dlperf.errors import DlperfError, StudyError
from dlperf.units import MIB_BYTES, NOT_MEASURED, format_mib, format_number
from dlperf.untrusted import path_component


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
              help="CPU threads (default: the physical cores other processes leave idle at the start; with "
                   "--executor dask, each worker's own)")
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
                   "than +-PCT% (e.g. 5), within --max-processes and --precision-budget (default: only the "
                   "study's repetitions)")
@click.option("--max-processes", type=click.IntRange(min=2), default=None, metavar="N",
              help="with --precision: at most N processes per case [default: 10]")
@click.option("--precision-budget", "precision_budget_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="with --precision: at most this much extra time for added processes "
                                      "[default: as long as the planned processes took]")
@click.option("--max-cases", type=click.IntRange(min=1), default=None, metavar="N",
              help=f"run a study of up to N case-repetitions (without it: at most {RUN_CASE_LIMIT:,}; "
                   f"`dlperf plan STUDY` counts them)")
@db_option
def run(study: str, quick: bool, frameworks: tuple[str, ...], devices: tuple[str, ...], new: bool,
        resume: str | None, retry_failed: bool, timeout_s: float | None, mem_limit_mb: int | None,
        threads: int | None, budget_s: float | None, energy_estimate: str | None, tdp_w: float | None,
        counters: bool, profile: bool | None, steps: int | None, wait_idle_s: float | None, executor: str,
        scheduler: str | None, precision_pct: float | None, max_processes: int | None,
        precision_budget_s: float | None, max_cases: int | None, db: str | None) -> None:
    """Run STUDY (a shipped name such as `smoke`, or a .yaml path); resumes an unfinished run."""
    from dlperf.cli.readers import machine_reports, report_data, run_machines
    from dlperf.report.registry import machine_sections
    from dlperf.report.sections import render_terminal as render_sections
    from dlperf.report.tables import render_terminal
    from dlperf.studies import load_study

    if counters:
        from dlperf.profiling.ncu import find_ncu

        if find_ncu() is None:
            raise DlperfError("--counters needs Nsight Compute: `ncu` is not on PATH nor in /usr/local/cuda/bin "
                              "(see `dlperf doctor`)")
    if energy_estimate == "tdp" and tdp_w is None:
        raise click.UsageError("--energy-estimate tdp needs --tdp-w WATTS (the CPU's thermal design power)")
    if tdp_w is not None and energy_estimate is None:
        raise click.UsageError("--tdp-w is only used with --energy-estimate tdp")
    check_resume_or_new(resume, new)
    from dlperf.cli.fleet import check_executor

    check_executor(executor, scheduler)
    if retry_failed and new:
        raise click.UsageError("--retry-failed runs again the failed cases of an unfinished run and --new starts "
                               "an empty one: give one of them")
    refuse_steps_with_budget(steps, budget_s)
    check_precision(precision_pct, max_processes, precision_budget_s, executor)
    if executor != "dask":  # a fleet's threads run on the workers' cores, not this machine's
        check_threads(threads)
    loaded = load_study(study, quick=quick)
    store, console, summary = execute_study(
        study, loaded, frameworks=list(frameworks), devices=list(devices), new=new, resume=resume, db=db,
        retry_failed=retry_failed, max_cases=max_cases,
        overrides={"timeout_s": timeout_s, "mem_limit_mb": mem_limit_mb, "threads": threads, "budget_s": budget_s,
                   "energy_estimate_tdp_w": tdp_w, "profile": profile, "steps": steps,
                   "precision_rel": None if precision_pct is None else precision_pct / 100,
                   "max_processes": max_processes, "precision_budget_s": precision_budget_s},
        counters=counters, wait_idle_s=wait_idle_s, scheduler=scheduler,
    )
    data = report_data(store, summary.run_id, None)
    machines = run_machines(store, data)
    render_terminal(data.run, data.env, data.results, console, machines)  # fleet: machine column
    render_sections(machine_sections(data, machine_reports(store, data, machines)), console)  # fleet: per machine
    console.print(f"results: run [bold]{summary.run_id}[/] in {store.url}", highlight=False)
    console.print(f"next: dlperf show {summary.run_id} | dlperf report {summary.run_id} --format html | "
                  f"dlperf verdicts {summary.run_id} | dlperf export {summary.run_id} --format csv", highlight=False)
    if summary.not_run:  # a fleet lacked a machine for some cases: the run is interrupted, those re-runnable
        raise DlperfError(f"run {summary.run_id} is interrupted: " + "; ".join(summary.not_run))


def check_resume_or_new(resume: str | None, new: bool) -> None:
    """--resume and --new together is a usage error (one continues a run, the other starts one)."""
    if resume and new:
        raise click.UsageError("--resume RUN continues a run and --new starts another: give one of them")


def check_precision(precision_pct: float | None, max_processes: int | None, budget_s: float | None,
                    executor: str) -> None:
    """--max-processes and --precision-budget only with --precision; --precision only for a local run (a fleet's
    processes run on several machines, whose spread is not one case's precision)."""
    if precision_pct is None and (max_processes is not None or budget_s is not None):
        raise click.UsageError("--max-processes and --precision-budget bound --precision: give --precision PCT too")
    if precision_pct is not None and executor == "dask":
        raise click.UsageError("--precision runs more processes here, between cases: it is not available with "
                               "--executor dask")


def check_threads(threads: int | None) -> None:
    """--threads beyond the logical cores is a usage error (more threads than cores only wait on each other)."""
    logical = os.cpu_count() or 1
    if threads is not None and threads > logical:
        raise click.UsageError(f"--threads {threads}: this machine has {logical} logical cores; more threads than "
                               f"cores only wait on each other")


def execute_study(study_arg: str, loaded: Any, *, frameworks: list[str], devices: list[str], new: bool,
                  resume: str | None, db: str | None, overrides: dict[str, Any], retry_failed: bool = False,
                  max_cases: int | None = None, counters: bool = False,
                  wait_idle_s: float | None = None, scheduler: str | None = None) -> tuple[Any, Any, Any]:
    """Run the study `loaded` (named `study_arg` on the command line) as `dlperf run` does: its checks before any
    store is opened (the threads it asks for, the case limit, the memory cap), then the store, the console, clean
    stops on SIGTERM/SIGHUP and the sweep with its progress lines; returns (store, console, the sweep's summary)."""
    from dlperf.cli.progress import ConsoleEvents
    from dlperf.runner.footprint import check_run_cap
    from dlperf.runner.sweep import run_study

    logical = os.cpu_count() or 1
    threads = overrides.get("threads")
    if threads is None and scheduler is None and loaded.settings.threads is not None and \
            loaded.settings.threads > logical:
        raise DlperfError(f"{study_arg}: threads: {loaded.settings.threads} in the study file, but this machine has "
                          f"{logical} logical cores; give --threads N (at most {logical}) to run it here")
    check_case_limit(study_arg, loaded, frameworks, devices, max_cases)
    check_run_cap(loaded, frameworks, devices, overrides.get("mem_limit_mb"), threads, warn=warn_line)
    if resume:
        check_resume(loaded, resume, db)
    from dlperf.cli.fleet import check_scheduler, connect_fleet  # --scheduler: the cases run on a fleet's workers

    if scheduler:
        check_scheduler(scheduler)
    store = open_store(db)
    console = new_console()
    stop_cleanly_on_signals()

    executor = connect_fleet(scheduler, store.url, warn_line) if scheduler else None
    try:
        summary = run_study(loaded, store, frameworks=frameworks, devices=devices, new=new, resume=resume,
                            retry_failed=retry_failed, overrides=overrides, counters=counters,
                            events=ConsoleEvents(console), wait_idle_s=wait_idle_s, executor=executor)
    finally:
        if executor is not None:
            executor.close()
    return store, console, summary


class ResumeMismatch(StudyError):
    """--resume names a run of another study, variant or selection (the same study file with other points)."""

    def __init__(self, message: str, run_id: str, existing: dict[str, Any]) -> None:
        super().__init__(message)
        self.run_id, self.existing = run_id, existing


def check_resume(loaded: Any, resume: str, db: str | None) -> None:
    """--resume RUN names a run in the store, of this study as loaded (name, variant and points): one line if not,
    before the store is created or any line (the threads chosen) is printed. A store file that does not exist
    has no run to resume, and is left uncreated."""
    from dlperf.errors import NoStoreError, UnknownRunError

    try:
        store = open_store(db, create=False)
    except NoStoreError as exc:
        raise UnknownRunError(f"--resume {resume}: no such run: the store {exc.path} does not exist (nothing has "
                              "been run into it; check --db or DLPERF_DB)") from None
    try:
        run_id = store.resolve_run(resume)
    except DlperfError as exc:
        raise type(exc)(f"--resume {resume}: {exc}") from None
    existing = store.run(run_id)
    if (existing.study, existing.variant, existing.study_hash) != (
            loaded.name, loaded.variant, loaded.study_hash):
        raise ResumeMismatch(f"--resume {resume}: run {run_id} is of study {existing.study} "
                             f"({existing.variant}), or of another version of its file; it cannot be resumed with "
                             f"{loaded.name} ({loaded.variant})", run_id, existing)


def warn_line(text: str) -> None:
    """One warning line on stderr; the command goes on."""
    click.echo(f"dlperf: warning: {text}", err=True)


def check_case_limit(study_arg: str, study: Any, frameworks: list[str], devices: list[str],
                     max_cases: int | None) -> None:
    """Refuse, before anything starts, a study of more case-repetitions than the limit (`RUN_CASE_LIMIT`, or
    `--max-cases N`): counted point by point without building the cases, and only until past the limit."""
    from dlperf.runner.cases import count_run_cases
    from dlperf.studies.loader import COUNT_CAP

    limit = max_cases or RUN_CASE_LIMIT
    count = count_run_cases(study, frameworks, devices, stop_after=max(limit, COUNT_CAP))
    if count.exact and count.n <= limit:
        return
    how_many = f"{count.n:,}" if count.exact else f"more than {count.n:,} (at most {count.at_most:,})"
    plan = " ".join(["dlperf plan", study_arg, *(["--quick"] if study.variant == "quick" else []),
                     *(f"--framework {f}" for f in frameworks), *(f"--device {d}" for d in devices)])
    raise StudyError(f"{study.name} ({study.variant}) expands to {how_many} case-repetitions, over "
                     f"{'--max-cases' if max_cases else 'the limit'} {limit:,}: see them with `{plan}`, or run "
                     f"them with --max-cases N (N at least their count)")


#: The signal that stopped this process (SIGTERM, SIGHUP), for its exit status 128 + N; none for Ctrl-C.
STOPPED_BY: list[int] = []


def raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    """A SIGTERM/SIGHUP handler: stop as cleanly as Ctrl-C does (the sweep stores what finished, marks the run
    interrupted and says so), then exit 128 + the signal's number, as shells expect (143, 129)."""
    STOPPED_BY.append(signum)
    raise KeyboardInterrupt


def stop_cleanly_on_signals() -> None:
    """SIGTERM and SIGHUP (a closed terminal) stop a command as Ctrl-C does."""
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, raise_keyboard_interrupt)


@click.command()
@click.argument("target", metavar="TARGET")
@click.option("-p", "--param", "params", type=KeyValue(), multiple=True,
              help="a parameter of TARGET's workload, its value read as YAML (repeatable): -p model=gpt2-tiny")
@click.option("--framework", default=None, metavar="NAME",
              help="torch, tensorflow, ... [default: torch; a FILE.onnx: onnxruntime]")
@click.option("--device", default="cpu", show_default=True, metavar="DEV", help="cpu, cuda, cuda:N")
@click.option("--task", type=click.Choice(["infer", "train", "generate"]), default=None,
              help="a SOURCE's task [default: train; a FILE.onnx: infer]")
@click.option("--input", "input_specs", multiple=True, metavar="NAME:DTYPE[DIMS]",
              help="a SOURCE's input, as in dlperf bench (B the batch searched; repeatable)")
@click.option("--inputs", "inputs_fn", default=None, metavar="PATH.py:FN", help="a SOURCE's FN(batch) inputs")
@click.option("--seq", type=click.IntRange(min=1), default=None, help="a SOURCE's sequence length (S)")
@click.option("--mem-limit", "mem_limit_mb", type=MemorySize(), default=None,
              help="memory cap of each probe's worker (2GiB, 512MiB, ...), so the search works on a CPU")
@click.option("--image-size", type=click.IntRange(min=1), default=None,
              help="a CNN model's square input side (default: model's)")
@click.option("--precision", type=click.Choice(["fp32", "amp"]), default=None,
              help="a CNN model's precision [default: fp32] (other workloads: -p precision=...)")
@click.option("--start", type=click.IntRange(min=1), default=1, show_default=True, help="first value tried")
@click.option("--max-batch", type=click.IntRange(min=1), default=8192, show_default=True,
              help="stop doubling here")
@click.option("--steps", type=click.IntRange(min=1), default=2, show_default=True,
              help="timed training steps per probe (after one warm-up step)")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True), default=1800.0,
              show_default=True, help="time-out per probe, seconds")
@click.option("--exact", is_flag=True, help="bisect to the exact value (default: to within 1/32 of it)")
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the memory-against-batch plot goes [default: reports/RUN/]")
@db_option
def maxbatch(target: str, params: tuple[tuple[str, YamlScalar], ...], framework: str | None, device: str,
             task: str | None, input_specs: tuple[str, ...], inputs_fn: str | None, seq: int | None,
             mem_limit_mb: int | None, image_size: int | None, precision: str | None, start: int, max_batch: int,
             steps: int,
             timeout_s: float, exact: bool, plot_dir: Path | None, db: str | None) -> None:
    """The largest batch that fits: TARGET is a CNN model (alexnet, caffenet, googlenet, lenet5; its training step),
    a workload with a memory axis (cnn, transformer; its other parameters as -p KEY=VALUE) or a SOURCE as dlperf
    bench takes it (file.py:NAME with --input, hf:ARCH, dlperf:NAME, FILE.onnx). Doubling, then bisection of the
    axis, a fresh worker per probe."""
    from rich.markup import escape

    from dlperf.cli.progress import ConsoleEvents, short
    from dlperf.report.plots.maxbatch import memory_plot
    from dlperf.report.sections import rich_table
    from dlperf.runner.maxbatch import UnknownTarget, check_search, check_source, resolve_target, search

    source_options = {"task": task, "input": input_specs, "inputs_fn": inputs_fn, "seq": seq}
    try:
        tgt = resolve_target(target, key_values(params), image_size=image_size, precision=precision,
                             source_options=source_options)
    except UnknownTarget as exc:
        raise click.BadParameter(str(exc), param_hint="'TARGET'") from None
    framework = framework or ("onnxruntime" if tgt.workload == "model" and target.endswith(".onnx") else "torch")
    check_search(tgt, framework=framework, start=start, max_batch=max_batch, device=device)
    check_source(tgt)  # a source: loaded and run once in a fresh process
    if mem_limit_mb:
        from dlperf.hardware.probe import default_threads
        from dlperf.runner.footprint import refuse_caps_below_imports

        refuse_caps_below_imports([framework], mem_limit_mb, default_threads(), source=f"--mem-limit {mem_limit_mb} "
                                  "MiB", warn=warn_line)
    store = open_store(db)
    console = new_console()
    stop_cleanly_on_signals()
    result = search(store, tgt, framework=framework, device=device, mem_limit_mb=mem_limit_mb, start=start,
                    max_batch=max_batch, steps=steps, timeout_s=timeout_s, exact=exact, events=ConsoleEvents(console))
    axis = tgt.axis
    rows = [[str(p.value), p.status, format_mib(p.peak_bytes or None, missing=NOT_MEASURED),
             format_number(p.time_per_sample_s or None, ".3g"), short(p.reason, 70)]
            for p in sorted(result.probes, key=lambda p: p.value)]
    what = "device allocator peak" if device != "cpu" else "worker peak RSS"
    console.print(rich_table(f"probes of {tgt.label} on {framework} {device} (memory: {what})",
                             [axis, "status", "peak memory", f"s/{tgt.sample} (median of {steps} steps)", "reason"],
                             rows))
    cap = f" under a {mem_limit_mb} MiB cap" if mem_limit_mb else ""
    if result.largest is None:
        console.print(f"no {escape(axis)} fits{cap}: {escape(axis)} {start} already failed", highlight=False)
    elif result.first_oom is None and result.stopped is None:
        console.print(f"largest {escape(axis)} that fits{cap}: at least {result.largest} (no OOM up to --max-batch "
                      f"{max_batch})", highlight=False)
    else:
        console.print(f"largest {escape(axis)} that fits{cap}: [bold]{result.largest}[/] ({escape(axis)} "
                      f"{result.first_oom} ran out of memory)" if result.first_oom else
                      f"largest {escape(axis)} that ran{cap}: {result.largest}", highlight=False)
    if result.stopped:
        console.print(f"[red]search stopped[/]: {escape(result.stopped)}")
    fits = [(p.value, p.peak_bytes / MIB_BYTES) for p in result.probes if p.status == "ok" and p.peak_bytes]
    failed = [(p.value, p.peak_bytes / MIB_BYTES) for p in result.probes if p.status != "ok" and p.peak_bytes]
    for p in memory_plot(fits, failed, f"{tgt.label} {framework} {device}: peak memory against {axis}{cap}",
                         plot_dir or Path("reports") / path_component(result.run_id), axis_label=axis):
        console.print(f"plot: {p}", highlight=False)
    console.print(f"results: run [bold]{result.run_id}[/] in {store.url}", highlight=False)
    if result.stopped:
        raise DlperfError(f"maxbatch: the search stopped before finding the boundary ({result.stopped})")


@click.command()
@click.option("--quick", is_flag=True, help="smaller arrays, numpy and torch only")
@click.option("--framework", "frameworks", multiple=True, metavar="NAME", help="only this framework (repeatable)")
@click.option("--device", "devices", multiple=True, metavar="DEV", help="only this device (repeatable)")
@click.option("--new", is_flag=True, help="measure again even if a peaks run could be resumed")
@db_option
def peaks(quick: bool, frameworks: tuple[str, ...], devices: tuple[str, ...], new: bool, db: str | None) -> None:
    """Theoretical peaks of this machine, and the GEMM FLOP/s and copy/triad bandwidth it achieves (stored)."""
    from dlperf.cli.progress import ConsoleEvents
    from dlperf.cli.readers import report_data
    from dlperf.report import peaks_table
    from dlperf.report.sections import render_terminal
    from dlperf.runner.sweep import run_study
    from dlperf.studies import load_study

    study = load_study("peaks", quick=quick)
    store = open_store(db)
    console = new_console()
    stop_cleanly_on_signals()
    summary = run_study(study, store, frameworks=list(frameworks), devices=list(devices), new=new,
                        events=ConsoleEvents(console))
    render_terminal(peaks_table.sections(report_data(store, summary.run_id, None)), console)
