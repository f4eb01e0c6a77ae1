"""The `dlperf` command. Thin: parse, call, print. Heavy imports happen inside commands."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from dlperf import __version__
from dlperf.cli_common import _console, _store, db_option
from dlperf.errors import DlperfError


class MemorySize(click.ParamType):
    """A memory size: `2GiB`, `512MiB`, `1.5GB`, or a plain number of MiB; converted to MiB."""

    name = "size"
    _UNITS = {"": 2**20, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6, "mib": 2**20,
              "g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12, "tib": 2**40}

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        import re

        if isinstance(value, int):
            return value
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
        unit = m.group(2).lower() if m else ""
        if not m or unit not in self._UNITS:
            self.fail(f"{value!r} is not a memory size (e.g. 2GiB, 512MiB, or MiB as a number)", param, ctx)
        mib = int(float(m.group(1)) * self._UNITS[unit] / 2**20)
        if mib < 1:
            self.fail(f"{value!r} is less than 1 MiB", param, ctx)
        return mib


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="dlperf")
def cli() -> None:
    """dlperf: how fast, how efficiently and at what cost deep-learning work runs, and why.

    Start with `dlperf doctor`, then `dlperf run smoke --quick`.
    """


@cli.command()
def doctor() -> None:
    """What this machine has: frameworks, devices, energy meters, profilers; and how to get the rest."""
    from rich.markup import escape
    from rich.table import Table

    from dlperf.doctor import all_checks

    table = Table(title="dlperf doctor", title_justify="left")
    for col in ("section", "item", "", "detail"):
        table.add_column(col, overflow="fold")
    for c in all_checks():
        table.add_row(escape(c.section), escape(c.name), "[green]yes[/]" if c.ok else "[red]no[/]", escape(c.detail))
    _console().print(table)


@cli.command("list")
def list_cmd() -> None:
    """Studies that ship with dlperf, workloads, and framework adapters."""
    from rich.markup import escape

    from dlperf.frameworks import REGISTRY as FRAMEWORKS
    from dlperf.studies import shipped_studies
    from dlperf.studies.loader import read_study_file
    from dlperf.workloads import REGISTRY as WORKLOADS

    console = _console()
    console.print("[bold]studies[/]")
    for name, path in shipped_studies().items():
        sf = read_study_file(path)
        quick = " (has --quick)" if sf.quick else ""
        console.print(escape(f"  {name:<17} {sf.description}{quick}"), highlight=False)
    console.print("[bold]workloads[/]")
    for name, cls in sorted(WORKLOADS.items()):
        w = cls()
        line = f"  {name:<17} {w.description} [frameworks: {', '.join(w.frameworks())}]"
        console.print(escape(line), highlight=False)
    console.print("[bold]frameworks[/]")
    for name, cls in sorted(FRAMEWORKS.items()):
        fw = cls()
        state = f"installed {fw.version}" if fw.available() else f"not installed ({fw.install_hint})"
        console.print(escape(f"  {name:<17} {state}"), highlight=False)


@cli.command()
@click.argument("study")
@click.option("--quick", is_flag=True, help="run the study's quick variant")
@click.option("--framework", "frameworks", multiple=True, metavar="NAME", help="only this framework (repeatable)")
@click.option("--device", "devices", multiple=True, metavar="DEV",
              help="only this device: cpu, cuda, cuda:N (repeatable)")
@click.option("--new", is_flag=True, help="start a new run even if an unfinished one could be resumed")
@click.option("--resume", metavar="RUN", default=None, help="resume this run id explicitly")
@click.option("--retry-failed", is_flag=True, help="run again the cases that ended in error/timeout/oom/crashed")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="worker time-out per case, seconds (overrides the study)")
@click.option("--mem-limit", "mem_limit_mb", type=MemorySize(), default=None,
              help="memory cap per worker: 2GiB, 512MiB, or MiB as a number (overrides the study)")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads (default: physical cores)")
@click.option("--budget", "budget_s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="timer budget per case, seconds (overrides the study)")
@click.option("--energy-estimate", type=click.Choice(["tdp"]), default=None,
              help="also store an ESTIMATE of CPU energy: TDP x utilisation (needs --tdp-w); never a measurement")
@click.option("--tdp-w", type=click.FloatRange(min=0, min_open=True), default=None,
              help="the CPU's TDP in watts, for --energy-estimate tdp")
@click.option("--counters", is_flag=True,
              help="also collect GPU hardware counters with Nsight Compute (ncu) for CUDA cases")
@click.option("--profile", is_flag=True, default=None,
              help="also profile each case: cProfile, and the framework's kernel profiler where dlperf has one "
                   "(torch.profiler, TensorFlow's profiler)")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="a fixed number of timed calls per case instead of the adaptive stop (overrides the study)")
@db_option
def run(study: str, quick: bool, frameworks: tuple[str, ...], devices: tuple[str, ...], new: bool,
        resume: str | None, retry_failed: bool, timeout_s: float | None, mem_limit_mb: int | None,
        threads: int | None, budget_s: float | None, energy_estimate: str | None, tdp_w: float | None,
        counters: bool, profile: bool | None, steps: int | None, db: str | None) -> None:
    """Run STUDY (a shipped name such as `smoke`, or a .yaml path); resumes an unfinished run."""
    from dlperf.report.registry import study_sections
    from dlperf.report.sections import render_terminal as render_sections
    from dlperf.report.tables import render_terminal
    from dlperf.runner.sweep import run_study
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
    loaded = load_study(study, quick=quick)
    store = _store(db)
    console = _console()
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)  # SIGTERM stops as cleanly as Ctrl-C
    summary = run_study(
        loaded, store, frameworks=list(frameworks), devices=list(devices), new=new, resume=resume,
        retry_failed=retry_failed,
        overrides={"timeout_s": timeout_s, "mem_limit_mb": mem_limit_mb, "threads": threads, "budget_s": budget_s,
                   "energy_estimate_tdp_w": tdp_w, "profile": profile, "steps": steps},
        counters=counters, console=console,
    )
    data = report_data(store, summary.run_id, None)
    render_terminal(data.run, data.env, data.results, console)
    render_sections(study_sections(data), console)
    console.print(f"results: run [bold]{summary.run_id}[/] in {store.url}", highlight=False)
    console.print(f"next: dlperf show {summary.run_id} | dlperf report {summary.run_id} --format markdown | "
                  f"dlperf export {summary.run_id} --format csv", highlight=False)


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@cli.command()
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@db_option
def runs(limit: int, db: str | None) -> None:
    """The most recent runs in the store."""
    from rich.table import Table

    rows = _store(db).list_runs(limit)
    table = Table(title="runs", title_justify="left")
    for col in ("run", "study", "variant", "status", "cases", "ok", "started (UTC)"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["study"], r["variant"], r["status"], f"{r['n_done'] or 0}/{r['n_cases']}",
                      str(r["n_ok"] or 0), f"{r['started_at']:%Y-%m-%d %H:%M:%S}")
    _console().print(table)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@db_option
def show(run_ref: str, db: str | None) -> None:
    """The results table of RUN (an id, a unique prefix, or `latest`)."""
    from dlperf.report.tables import render_terminal

    store = _store(db)
    run_row = store.run(run_ref)
    render_terminal(run_row, store.run_environment(run_row["id"]), typed_results(store, run_row["id"]), _console())


@cli.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@db_option
def compare(run_a: str, run_b: str, db: str | None) -> None:
    """Per-case ratio RUN_B / RUN_A of median times, with a Mann-Whitney U test on the raw samples."""
    from rich.markup import escape
    from rich.table import Table

    from dlperf.hardware.identity import diff
    from dlperf.report.compare import ALPHA, compare_runs
    from dlperf.timing import format_time

    store = _store(db)
    ra, rb = store.run(run_a), store.run(run_b)
    console = _console()
    diffs = diff(store.run_environment(ra["id"]), store.run_environment(rb["id"]))  # the peaks each ran under too
    if diffs:
        console.print(f"[bold yellow]the two runs come from different environments[/] ({len(diffs)} fields differ); "
                      "ratios below compare different machines or software:", highlight=False)
        for key, va, vb in diffs[:12]:
            console.print(escape(f"  {key}: {va!r} -> {vb!r}"), highlight=False)
    rows = compare_runs(typed_results(store, ra["id"]), typed_results(store, rb["id"]))
    table = Table(title=f"compare A={ra['id']}  B={rb['id']}", title_justify="left")
    for col in ("case", "A median", "B median", "B/A", "p (MWU)", "verdict"):
        table.add_column(col, overflow="fold")
    for c in rows:
        case = c.case_key + (f" #{c.repetition}" if c.repetition else "")
        style = {"faster": "green", "slower": "red"}.get(c.verdict)
        table.add_row(escape(case), format_time(c.median_a_s), format_time(c.median_b_s),
                      "-" if c.ratio is None else f"{c.ratio:.3f}",
                      "-" if c.p_value is None else f"{c.p_value:.3g}", c.verdict, style=style)
    console.print(table)
    console.print(f"B/A < 1: B is faster. 'within noise': Mann-Whitney U two-sided p >= {ALPHA}.", highlight=False)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="write to this file instead of stdout")
@db_option
def export(run_ref: str, fmt: str, output: Path | None, db: str | None) -> None:
    """RUN's results as CSV (one flat row per case) or JSON (everything, raw samples included)."""
    from dlperf.store.export import to_csv, to_json

    store = _store(db)
    run_row = store.run(run_ref)
    results = typed_results(store, run_row["id"])
    text = to_csv(results) if fmt == "csv" else to_json(run_row, store.run_environment(run_row["id"]), results)
    _write(text, output)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["terminal", "markdown"]), default="terminal", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None)
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where plots go [default: reports/RUN/]")
@db_option
def report(run_ref: str, fmt: str, output: Path | None, plot_dir: Path | None, db: str | None) -> None:
    """A report of RUN: tables (terminal or Markdown) and, for an ops run, the study layout and a roofline plot."""
    from dlperf.report.registry import study_sections
    from dlperf.report.sections import render_markdown as sections_markdown
    from dlperf.report.sections import render_terminal as sections_terminal
    from dlperf.report.tables import render_markdown, render_terminal

    data = report_data(_store(db), run_ref, plot_dir)
    sections = study_sections(data)
    if fmt == "markdown":
        md_dir = output.parent if output else Path.cwd()
        _write(render_markdown(data.run, data.env, data.results) + sections_markdown(sections, md_dir), output)
    else:
        console = _console()
        render_terminal(data.run, data.env, data.results, console)
        sections_terminal(sections, console)


def typed_results(store: Any, run_id: str) -> list[Any]:
    """A run's results, typed, their statistics recomputed from the stored raw samples."""
    from dlperf.core.result import CaseResult

    return [CaseResult.from_row(r) for r in store.results(run_id)]


def report_data(store: Any, run_ref: str, plot_dir: Path | None) -> Any:
    """Everything a study report needs, read from the store here (reports never query it): the run, its
    environment, its typed results, and the measured peaks of the same host for the roofline."""
    from dlperf.hardware.roofline import measured_peaks
    from dlperf.report.readers import peaks_runs
    from dlperf.report.study import ReportData

    run_row = store.run(run_ref)
    env = store.run_environment(run_row["id"])  # with the peaks this run was measured under
    return ReportData(run_row, env, typed_results(store, run_row["id"]), plot_dir or Path("reports") / run_row["id"],
                      measured_peaks(peaks_runs(store, [env]), env))


@cli.command()
@click.argument("model", type=click.Choice(["alexnet", "caffenet", "googlenet", "lenet5"]))
@click.option("--framework", default="torch", show_default=True, metavar="NAME", help="torch, tensorflow, ...")
@click.option("--device", default="cpu", show_default=True, metavar="DEV", help="cpu, cuda, cuda:N")
@click.option("--mem-limit", "mem_limit_mb", type=MemorySize(), default=None,
              help="memory cap of each probe's worker (2GiB, 512MiB, ...), so the search works on a CPU")
@click.option("--image-size", type=click.IntRange(min=1), default=None, help="square input side (default: model's)")
@click.option("--precision", type=click.Choice(["fp32", "amp"]), default="fp32", show_default=True)
@click.option("--start", type=click.IntRange(min=1), default=1, show_default=True, help="first batch tried")
@click.option("--max-batch", type=click.IntRange(min=1), default=8192, show_default=True,
              help="stop doubling here")
@click.option("--steps", type=click.IntRange(min=1), default=2, show_default=True,
              help="timed training steps per probe (after one warm-up step)")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=1800.0,
              show_default=True, help="time-out per probe, seconds")
@click.option("--exact", is_flag=True, help="bisect to the exact batch (default: to within 1/32 of it)")
@click.option("--plot-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the memory-against-batch plot goes [default: reports/RUN/]")
@db_option
def maxbatch(model: str, framework: str, device: str, mem_limit_mb: int | None, image_size: int | None,
             precision: str, start: int, max_batch: int, steps: int, timeout_s: float, exact: bool,
             plot_dir: Path | None, db: str | None) -> None:
    """The largest batch of MODEL's training step that fits: doubling, then bisection, a fresh worker per probe."""
    from rich.markup import escape

    from dlperf.report.plots import memory_plot
    from dlperf.report.sections import rich_table
    from dlperf.runner.maxbatch import search, short

    store = _store(db)
    console = _console()
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    result = search(store, model=model, framework=framework, device=device, image_size=image_size,
                    precision=precision, mem_limit_mb=mem_limit_mb, start=start, max_batch=max_batch, steps=steps,
                    timeout_s=timeout_s, exact=exact, console=console)
    rows = [[str(p.batch), p.status, f"{p.peak_bytes / 2**20:,.0f} MiB" if p.peak_bytes else "not measured",
             f"{p.time_per_image_s:.3g}" if p.time_per_image_s else "-", short(p.reason, 70)]
            for p in sorted(result.probes, key=lambda p: p.batch)]
    what = "device allocator peak" if device != "cpu" else "worker peak RSS"
    console.print(rich_table(f"probes of {model} on {framework} {device} (memory: {what})",
                             ["batch", "status", "peak memory", f"s/image (median of {steps} steps)", "reason"], rows))
    cap = f" under a {mem_limit_mb} MiB cap" if mem_limit_mb else ""
    if result.largest is None:
        console.print(f"no batch fits{cap}: batch {start} already failed", highlight=False)
    elif result.first_oom is None and result.stopped is None:
        console.print(f"largest batch that fits{cap}: at least {result.largest} (no OOM up to --max-batch "
                      f"{max_batch})", highlight=False)
    else:
        console.print(f"largest batch that fits{cap}: [bold]{result.largest}[/] (batch {result.first_oom} "
                      f"ran out of memory)" if result.first_oom else
                      f"largest batch that ran{cap}: {result.largest}", highlight=False)
    if result.stopped:
        console.print(f"[red]search stopped[/]: {escape(result.stopped)}")
    fits = [(p.batch, p.peak_bytes / 2**20) for p in result.probes if p.status == "ok" and p.peak_bytes]
    failed = [(p.batch, p.peak_bytes / 2**20) for p in result.probes if p.status != "ok" and p.peak_bytes]
    for p in memory_plot(fits, failed, f"{model} {framework} {device}: peak memory against batch{cap}",
                         plot_dir or Path("reports") / result.run_id):
        console.print(f"plot: {p}", highlight=False)
    console.print(f"results: run [bold]{result.run_id}[/] in {store.url}", highlight=False)
    if result.stopped:
        raise DlperfError(f"maxbatch: the search stopped before finding the boundary ({result.stopped})")


@cli.command()
@click.option("--quick", is_flag=True, help="smaller arrays, numpy and torch only")
@click.option("--framework", "frameworks", multiple=True, metavar="NAME", help="only this framework (repeatable)")
@click.option("--device", "devices", multiple=True, metavar="DEV", help="only this device (repeatable)")
@click.option("--new", is_flag=True, help="measure again even if a peaks run could be resumed")
@db_option
def peaks(quick: bool, frameworks: tuple[str, ...], devices: tuple[str, ...], new: bool, db: str | None) -> None:
    """Theoretical peaks of this machine, and the GEMM FLOP/s and copy/triad bandwidth it achieves (stored)."""
    from dlperf.report import peaks_table
    from dlperf.report.sections import render_terminal
    from dlperf.runner.sweep import run_study
    from dlperf.studies import load_study

    study = load_study("peaks", quick=quick)
    store = _store(db)
    console = _console()
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    summary = run_study(study, store, frameworks=list(frameworks), devices=list(devices), new=new, console=console)
    render_terminal(peaks_table.sections(report_data(store, summary.run_id, None)), console)


def _register_subgroups() -> None:
    from dlperf.cli_hw import hw
    from dlperf.cli_recommend import recommend  # also adds `hw measured`

    cli.add_command(hw)
    cli.add_command(recommend)


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise DlperfError(f"{output}: cannot write ({exc.strerror})") from None
    click.echo(f"wrote {output}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user-facing failure is one line on stderr and a non-zero exit."""
    try:
        code = cli.main(args=argv, prog_name="dlperf", standalone_mode=False)
    except DlperfError as exc:
        click.echo(f"dlperf: {exc}" if exc.exit_code == 130 else f"dlperf: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx and exc.ctx.parent else " (see 'dlperf --help')"
        click.echo(f"dlperf: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"dlperf: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("dlperf: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("DLPERF_DEBUG"):
            raise
        click.echo(f"dlperf: internal error: {type(exc).__name__}: {exc} (set DLPERF_DEBUG=1 for the traceback)",
                   err=True)
        sys.exit(70)
    sys.exit(code or 0)


_register_subgroups()

if __name__ == "__main__":
    main()
