"""`dlperf maxbatch TARGET`: the largest batch (or sequence) that fits, by doubling then bisection, a fresh worker
per probe (`runner.maxbatch`); the probes' table, the answer and a plot of memory against the axis.

Its options come as two groups: how the target is built (`TargetOptions`) and how it is searched
(`SearchOptions`); the store and the console are `execute.open_session`'s, as every measuring command's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from rich.markup import escape

from dlperf.cli.execute import open_session, results_line, warn_line
from dlperf.cli.options import FiniteFloatRange, KeyValue, MemorySize, YamlScalar, db_option, grouped, key_values
from dlperf.errors import DlperfError
from dlperf.runner.footprint import refuse_caps_below_imports
from dlperf.units import MIB_BYTES, NOT_MEASURED, format_mib, format_number
from dlperf.untrusted import path_component


@dataclass(frozen=True)
class TargetOptions:
    """What TARGET is run with: its workload's -p parameters, a CNN model's image size and precision, a source's
    task, inputs and sequence length."""

    params: tuple[tuple[str, YamlScalar], ...] = ()
    task: str | None = None
    input_specs: tuple[str, ...] = ()
    inputs_fn: str | None = None
    seq: int | None = None
    image_size: int | None = None
    precision: str | None = None


@dataclass(frozen=True)
class SearchOptions:
    """How the search runs: where (framework, device, memory cap per probe), from and to which value, how long
    each probe times and may take, and whether it bisects to the exact value."""

    framework: str | None = None
    device: str = "cpu"
    mem_limit_mb: int | None = None
    start: int = 1
    max_batch: int = 8192
    steps: int = 2
    timeout_s: float = 1800.0
    exact: bool = False


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
@click.option("--start", type=click.IntRange(min=1), default=1, show_default=True,
              help="first value tried (halved until one fits where it does not)")
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
@grouped(what=TargetOptions, how=SearchOptions)
def maxbatch(target: str, what: TargetOptions, how: SearchOptions, plot_dir: Path | None, db: str | None) -> None:
    """The largest batch that fits: TARGET is a CNN model (alexnet, caffenet, googlenet, lenet5; its training step),
    a workload with a memory axis (cnn, transformer; its other parameters as -p KEY=VALUE) or a SOURCE as dlperf
    bench takes it (file.py:NAME with --input, hf:ARCH, dlperf:NAME, FILE.onnx). Doubling, then bisection of the
    axis, a fresh worker per probe."""
    from dlperf.cli.progress import ConsoleEvents, short
    from dlperf.report.plots.maxbatch import memory_plot
    from dlperf.report.sections import rich_table
    from dlperf.runner.maxbatch import UnknownTarget, check_search, check_source, resolve_target, search

    source_options = {"task": what.task, "input": what.input_specs, "inputs_fn": what.inputs_fn, "seq": what.seq}
    try:
        tgt = resolve_target(target, key_values(what.params), image_size=what.image_size, precision=what.precision,
                             source_options=source_options)
    except UnknownTarget as exc:
        raise click.BadParameter(str(exc), param_hint="'TARGET'") from None
    framework = how.framework or ("onnxruntime" if tgt.workload == "model" and target.endswith(".onnx") else "torch")
    device, mem_limit_mb, start, max_batch, steps = how.device, how.mem_limit_mb, how.start, how.max_batch, how.steps
    check_search(tgt, framework=framework, start=start, max_batch=max_batch, device=device)
    check_source(tgt)  # a source: loaded and run once in a fresh process
    if mem_limit_mb:
        from dlperf.hardware.probe import default_threads

        refuse_caps_below_imports([framework], mem_limit_mb, default_threads(), source=f"--mem-limit {mem_limit_mb} "
                                  "MiB", warn=warn_line)
    store, console = open_session(db)
    result = search(store, tgt, framework=framework, device=device, mem_limit_mb=mem_limit_mb, start=start,
                    max_batch=max_batch, steps=steps, timeout_s=how.timeout_s, exact=how.exact,
                    events=ConsoleEvents(console))
    axis = tgt.axis
    rows = [[str(p.value), p.status, format_mib(p.peak_bytes or None, missing=NOT_MEASURED),
             format_number(p.time_per_sample_s or None, ".3g"), short(p.reason, 70)]
            for p in sorted(result.probes, key=lambda p: p.value)]
    peak_kind = "device allocator peak" if device != "cpu" else "worker peak RSS"
    console.print(rich_table(f"probes of {tgt.label} on {framework} {device} (memory: {peak_kind})",
                             [axis, "status", "peak memory", f"s/{tgt.sample} (median of {steps} steps)", "reason"],
                             rows))
    cap = f" under a {mem_limit_mb} MiB cap" if mem_limit_mb else ""
    if result.largest is None:
        smallest = min((p.value for p in result.probes), default=start)
        console.print(f"no {escape(axis)} fits{cap}: {escape(axis)} {smallest} already failed", highlight=False)
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
    results_line(console, result.run_id, store.url)
    if result.stopped:
        raise DlperfError(f"maxbatch: the search stopped before finding the boundary ({result.stopped})")


