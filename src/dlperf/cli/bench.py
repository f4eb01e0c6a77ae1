"""`dlperf bench SOURCE`: a user's model measured as a narrowed study of the `model` workload.

The source's text is checked here (nothing imported), then in a fresh process (`workloads.model.check`: the
source loaded, the task checked, one forward pass at batch 1), so a bad source is one `dlperf: error:` line and
exit 2 before any store is opened. The cases (framework x device x batch x precision) then run through `dlperf
run`'s path (`execute.execute_study`: workers, store, resume), and the run table and the model report are
printed (`execute.print_run`). `--variant` adds the variants (`workloads.model.variants`: torch's compilers,
onnxruntime's optimisation levels, OpenVINO's hints) as an axis, each on its own framework (the others' cases of
it are left out; eager, the reference, runs with them), and the model report adds the variants' table
(`report.compiler_report`).
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from dlperf.cli.execute import execute_study, print_run
from dlperf.cli.options import FiniteFloatRange, db_option, grouped
from dlperf.cli.run_options import RunOptions
from dlperf.cli.serve_select import check_frameworks
from dlperf.errors import DlperfError

STUDY = "bench"


@dataclass(frozen=True)
class BenchOptions:
    """What `dlperf bench` measures of SOURCE: the frameworks and devices (the study's own, not a filter of one),
    the task and its inputs, the batches, precisions and variants (each an axis), and the timer's budget and
    repetitions. How the run goes (--threads, --new, --db) is its `RunOptions`."""

    task: str = "infer"
    frameworks: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    batches: tuple[int, ...] = ()
    seq: int | None = None
    input_specs: tuple[str, ...] = ()
    inputs_fn: str | None = None
    precisions: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    prompt_len: int | None = None
    new_tokens: int | None = None
    budget_s: float = 1.0
    repetitions: int = 1


@click.command()
@click.argument("source")
@click.option("--task", type=click.Choice(["infer", "train", "generate"]), default="infer", show_default=True,
              help="infer: a forward pass; train: one SGD step; generate: a causal LM's new tokens")
@click.option("--framework", "frameworks", multiple=True, metavar="NAME",
              help="torch (default; a FILE.onnx: onnxruntime and openvino), onnxruntime, openvino (through the "
                   "torch module's ONNX export), tensorflow, jax (dlperf:NAME models only) (repeatable)")
@click.option("--device", "devices", multiple=True, metavar="DEV", help="cpu (default), cuda, cuda:N (repeatable)")
@click.option("--batch", "batches", type=click.IntRange(min=1), multiple=True, help="batch size (repeatable; "
              "default 1)")
@click.option("--seq", type=click.IntRange(min=1), default=None, help="sequence length (S in --input)")
@click.option("--input", "input_specs", multiple=True, metavar="NAME:DTYPE[DIMS]",
              help="an input, e.g. x:float32[B,3,224,224] or ids:int64[B,S] (repeatable, positional order)")
@click.option("--inputs", "inputs_fn", default=None, metavar="PATH.py:FN", help="FN(batch) returns the inputs")
@click.option("--precision", "precisions", type=click.Choice(["fp32", "bf16", "fp16", "int8"]), multiple=True,
              help="fp32 (default); bf16: torch autocast; fp16: autocast, CUDA only; int8: each runtime's own "
                   "quantizer, task infer (repeatable)")
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="eager (default); torch: compile, compile:max-autotune-no-cudagraphs, compile:reduce-overhead, "
                   "export; onnxruntime: ort:none|basic|all; openvino: ov:latency|throughput; tensorflow: graph, "
                   "xla; jax: jit (its eager, also named no-jit, runs under jax.disable_jit) (repeatable; eager, "
                   "each framework's reference, runs with any of them)")
@click.option("--prompt-len", type=click.IntRange(min=1), default=None, help="generate: prompt tokens (32)")
@click.option("--new-tokens", type=click.IntRange(min=1), default=None, help="generate: tokens per call (16)")
@click.option("--budget", "budget_s", type=FiniteFloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="timer budget per case, seconds")
@click.option("--repetitions", type=click.IntRange(min=1), default=1, show_default=True,
              help="times each case is measured, each in its own process")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads")
@click.option("--new", is_flag=True, help="start a new run even if an unfinished one could be resumed")
@db_option
@grouped(what=BenchOptions, options=RunOptions)
def bench(source: str, what: BenchOptions, options: RunOptions) -> None:
    """Measure SOURCE: dlperf:NAME, hf:ARCH[,key=value...], hf:PATH, FILE.onnx, path/to/file.py:NAME or
    package.module:NAME.

    A user's file is Python that the worker runs. Each path is checked against the eager fp32 torch reference (a
    FILE.onnx, on onnxruntime and openvino by default: against onnxruntime's unoptimised fp32 outputs)."""
    from pydantic import ValidationError

    from dlperf.core.settings import RunSettings
    from dlperf.runner.cases import check_devices
    from dlperf.sources import canonical, check_text
    from dlperf.studies.loader import Study
    from dlperf.workloads.model import check, refusals

    onnx = source.endswith(".onnx")
    fws = list(what.frameworks) or (["onnxruntime", "openvino"] if onnx else ["torch"])
    if onnx and "torch" in fws:
        raise DlperfError(f"{source}: an ONNX file runs on onnxruntime and openvino, not on torch")
    if onnx and what.task != "infer":  # said as the file's, before the runtimes' own reason for any task but infer
        raise DlperfError(f"{source}: an ONNX file runs task infer, not {what.task}")
    check_frameworks(fws)
    check_devices(list(what.devices))
    check_text(source)
    source = canonical(source)  # one spelling of a file (`./m.onnx`, `/here/m.onnx`): two runs of it compare
    inputs_fn = canonical(what.inputs_fn) if what.inputs_fn and ".py:" in what.inputs_fn else what.inputs_fn
    point = {"source": source, "task": what.task, "seq": what.seq, "input": list(what.input_specs) or None,
             "inputs_fn": inputs_fn, "prompt_len": what.prompt_len, "new_tokens": what.new_tokens}
    point = {k: v for k, v in point.items() if v is not None}
    try:
        first = check.ModelParams.model_validate(point | {"batch": 1})
        # each as the variant it is (an alias, no-jit, as its variant)
        variants = [check.ModelParams.model_validate(point | {"batch": 1, "variant": name}).variant
                    for name in what.variants]
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DlperfError(f"{source}: {err['msg'].removeprefix('Value error, ')}") from None
    named = list(dict.fromkeys(variants))
    named = ["eager", *(v for v in named if v != "eager")] if set(named) - {"eager"} else []  # eager: the reference
    exclude = compiler_cases(source, fws, named)
    asked = [first.model_copy(update={"precision": p}) for p in what.precisions or ("fp32",)]
    devices = list(what.devices or ("cpu",))
    refused = [why for why in (refusals.refusal(fw, dev, p) for fw in fws for dev in devices for p in asked)
               if why is not None]
    if len(refused) == len(fws) * len(devices) * len(asked):  # nothing asked runs: one line, before any store
        raise DlperfError(refused[0])                           # (not a run of `unsupported` cases)
    check.preflight(first)
    grid: dict[str, object] = point | ({"input": [point["input"]]} if "input" in point else {})  # a list: one value
    grid |= {"batch": sorted(set(what.batches or (1,))), "precision": list(what.precisions or ("fp32",))}
    if named:  # only with a compiler variant: a plain bench's case keys stay as they were
        grid["variant"] = named
    budget_s = what.budget_s
    settings = RunSettings(frameworks=fws, devices=devices, params=grid, budget_s=budget_s,
                           min_run_time_s=min(0.2, budget_s), repetitions=what.repetitions, warmup=3, timeout_s=900,
                           exclude=exclude)
    loaded = Study(name=STUDY, description=f"dlperf bench {source}", workload="model", variant="full",
                   path="(dlperf bench)", settings=settings)
    print_run(execute_study(STUDY, loaded, options), ["show RUN", "report RUN --format html"])


def compiler_cases(source: str, frameworks: list[str], variants: list[str]) -> list[dict[str, object]]:
    """The `exclude` rules that keep each variant on the framework that runs it (`variants.RUN_BY`; eager runs on
    all); DlperfError where no framework asked for runs a variant asked for."""
    from dlperf.frameworks import REGISTRY
    from dlperf.workloads.model.variants import RUN_BY, not_run_by, runs

    rules: list[dict[str, object]] = []
    for name in variants:
        others = [fw for fw in frameworks if not runs(REGISTRY[fw].family, name)]
        if len(others) == len(frameworks):
            raise DlperfError(f"{source}: {not_run_by(', '.join(frameworks), name)} (add --framework "
                              f"{RUN_BY[name]})")
        if others:
            rules.append({"framework": others, "variant": name})
    return rules
