"""`dlperf maxbatch`: the largest value of a workload's memory axis that fits, by doubling then bisecting.

The target is a CNN model's name (study 001's form: the cnn workload's training step, its batch searched), the
name of any workload that declares a `memory_axis` (its class attribute, e.g. the transformer's `batch`), with
that workload's other parameters given as `-p KEY=VALUE`, or a source (`dlperf bench SOURCE`'s: a user's
module, `hf:...`, `dlperf:NAME`, `FILE.onnx`), run as the `model` workload with its batch searched
(`source_target`; `check_source` loads it once before any store is opened). Every probe is a fresh worker (so
one probe's memory never helps or hurts the next) and is stored as a case of its own run, out-of-memory probes
included.
Out of memory means: the framework's OOM error, a kill by the kernel's OOM
killer, or the worker's memory cap (`mem_limit_mb`, RLIMIT_DATA), including an
ambiguous error a fresh worker has shown to be the cap's (runner.recheck). Any other
failure stops the search and is reported as what it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from dlperf.core.settings import RunSettings
from dlperf.errors import StudyError
from dlperf.frameworks import get_framework
from dlperf.hardware.identity import derived, identity_hash
from dlperf.hardware.probe import default_threads
from dlperf.runner.events import RunEvents
from dlperf.runner.lifecycle import NewRun, open_run
from dlperf.runner.sweep import collect_fingerprint, run_case
from dlperf.sources import SourceError, canonical, kind_of
from dlperf.store import Store
from dlperf.studies import Case
from dlperf.workloads.model import ModelParams, refusals
from dlperf.workloads.model.check import preflight

#: The study name of every maxbatch run (one of lifecycle.SEARCH_STUDIES: never resumed).
MAXBATCH_STUDY = "maxbatch"
#: The settings a maxbatch run stores (in this order): the ones a probe's timing depends on.
STORED_SETTINGS = ("steps", "warmup", "timeout_s", "mem_limit_mb", "threads", "energy", "seed")


class UnknownTarget(StudyError):
    """A TARGET that is neither a CNN model, a workload with a memory axis nor a source."""


#: The options only a source target takes, as `resolve_target`'s `source_options` keys, and their flags.
SOURCE_OPTIONS = {"task": "--task", "input": "--input", "inputs_fn": "--inputs", "seq": "--seq"}


@dataclass(frozen=True)
class Target:
    """What a search runs: `workload`'s step with `params` fixed and `axis` searched. `label` names it in the
    output and as the run's variant; `model` is set for the CNN form (TARGET a CNN model's name)."""

    workload: str
    axis: str
    params: dict[str, Any]
    label: str
    model: str | None = None

    @property
    def sample(self) -> str:
        from dlperf.workloads import REGISTRY

        return REGISTRY[self.workload].sample_unit


@dataclass
class Probe:
    value: int  # of the target's axis
    status: str
    reason: str | None
    peak_bytes: int | None
    time_per_sample_s: float | None


@dataclass
class MaxBatch:
    run_id: str
    largest: int | None  # None: nothing fit (not even 1), or a failure stopped the search first
    first_oom: int | None  # None: the search reached max_batch without an OOM
    stopped: str | None = None  # why the search stopped early (a non-OOM failure)
    probes: list[Probe] = field(default_factory=list)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    err = errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()))
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def resolve_target(target: str, params: dict[str, Any] | None = None, *, image_size: int | None = None,
                   precision: str | None = None, source_options: dict[str, Any] | None = None) -> Target:
    """`target` (a CNN model, a workload with a memory axis or a source) and its `-p` parameters, as a Target;
    StudyError names the first problem. `image_size` and `precision` are the CNN form's options;
    `source_options` (`SOURCE_OPTIONS`' keys, None where not given) a source's."""
    from dlperf.models import MODELS
    from dlperf.workloads import REGISTRY

    params = dict(params or {})
    given = {k: v for k, v in (source_options or {}).items() if v not in (None, (), [])}
    if target not in MODELS and target not in REGISTRY and is_source(target):
        return source_target(target, params, given, image_size=image_size, precision=precision)
    if given:
        raise StudyError(f"maxbatch: {', '.join(SOURCE_OPTIONS[k] for k in given)} "
                         f"{'is' if len(given) == 1 else 'are'} for a SOURCE target (file.py:NAME, hf:ARCH, "
                         f"dlperf:NAME, FILE.onnx), not {target!r}")
    if target in MODELS:
        options = {"model": ("TARGET", target), "precision": ("--precision", precision),
                   "image_size": ("--image-size", image_size)}
        for key, (option, value) in options.items():
            if key in params and value is not None:
                raise StudyError(f"maxbatch: -p {key} and {option} both set the CNN's {key}: give one")
        base: dict[str, Any] = {"model": target, "precision": params.pop("precision", precision or "fp32")}
        if image_size or "image_size" in params:
            base["image_size"] = params.pop("image_size", image_size)
        return Target("cnn", "batch", base | params, target, model=target)
    axes = sorted(n for n, w in REGISTRY.items() if w.memory_axis)
    if target not in REGISTRY:
        raise UnknownTarget(f"{target!r} is neither a CNN model ({', '.join(sorted(MODELS))}), a workload with "
                            f"a memory axis ({', '.join(axes)}) nor a source (file.py:NAME, pkg.mod:NAME, "
                            f"hf:ARCH, dlperf:NAME, FILE.onnx)")
    axis = REGISTRY[target].memory_axis
    if axis is None:
        raise UnknownTarget(f"workload {target!r} has no memory axis to search (workloads with one: "
                            f"{', '.join(axes)})")
    for option, value in (("--image-size", image_size), ("--precision", precision)):
        if value is not None:
            raise StudyError(f"maxbatch: {option} is for a CNN model's name; give workload {target!r} its "
                             f"parameters with -p KEY=VALUE")
    if axis in params:
        raise StudyError(f"maxbatch: -p {axis} sets the axis the search varies (use --start and --max-batch)")
    label = " ".join([target, *(f"{k}={v}" for k, v in params.items())])
    return Target(target, axis, params, label)


def is_source(text: str) -> bool:
    """Whether `text` has a source's form (`sources.kind_of`; its check comes with the parameters')."""
    try:
        kind_of(text)
    except SourceError:
        return False
    return True


def source_target(source: str, params: dict[str, Any], options: dict[str, Any], *, image_size: int | None = None,
                  precision: str | None = None) -> Target:
    """A source as the `model` workload's target, its batch searched. The task is `options`' or `-p task=`'s,
    else a training step (as the CNN form's), an ONNX file's inference (the one task it runs)."""
    if image_size is not None or precision is not None:
        raise StudyError("maxbatch: --image-size and --precision are for a CNN model's name; give a source's "
                         "precision as -p precision=bf16")
    for key in ("source", "batch", *options):
        if key in params:
            what = {"source": "TARGET", "batch": "the search (use --start and --max-batch)"}.get(key) or \
                SOURCE_OPTIONS[key]
            raise StudyError(f"maxbatch: -p {key} is set by {what}: give it once")
    source = canonical(source)  # one spelling of a file: two runs of it compare
    fixed: dict[str, Any] = {"source": source}
    fixed |= params | {k: list(v) if k == "input" else canonical(v) if k == "inputs_fn" and ".py:" in v else v
                       for k, v in options.items()}
    fixed.setdefault("task", "infer" if source.endswith(".onnx") else "train")
    shown = [f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in fixed.items() if k != "source"]
    return Target("model", "batch", fixed, " ".join([source, *shown]))


def check_source(target: Target) -> None:
    """A source target loaded and run once at batch 1 in a fresh process (`workloads.model.check`): a DlperfError
    with its one line where it cannot be (no-op for other targets). Called before the store is opened."""
    if target.workload == "model":
        preflight(ModelParams.model_validate(target.params | {"batch": 1}))


def check_search(target: Target, *, framework: str, start: int, max_batch: int, device: str | None = None) -> None:
    """The search's fixed parameters, checked: a StudyError names the first bad one (a device this machine lacks
    too). Called before the store is opened, so a bad request creates nothing."""
    from dlperf.runner.cases import check_devices
    from dlperf.workloads import REGISTRY

    try:
        get_framework(framework)
    except KeyError as exc:
        raise StudyError(f"--framework: {exc.args[0]}") from None
    has = REGISTRY[target.workload]().frameworks()
    if framework not in has:  # else a store, a run and a probe `unsupported` before the same refusal
        raise StudyError(f"maxbatch: workload {target.workload!r} has no {framework} implementation (it has: "
                         f"{', '.join(has)}); give one of them with --framework")
    if device is not None:
        check_devices([device])
    try:
        parsed = REGISTRY[target.workload].Params.model_validate(target.params | {target.axis: start})
    except ValueError as exc:
        msg = _first_error(exc)
        if target.model is not None:  # the CNN form's messages, as they always were
            errors = getattr(exc, "errors", None)
            msg = errors()[0]["msg"] if callable(errors) else str(exc)
        raise StudyError(f"maxbatch: {msg}") from None
    why = refusals.refusal(framework, device or "cpu", parsed) if isinstance(parsed, ModelParams) else None
    if why is not None:  # a source TensorFlow or JAX has no build of, a task or precision the framework lacks
        raise StudyError(f"maxbatch: {why}")
    if start < 1 or max_batch < start:
        raise StudyError("maxbatch: need 1 <= --start <= --max-batch")


def search(store: Store, target: Target, *, framework: str, device: str, mem_limit_mb: int | None = None,
           start: int = 1, max_batch: int = 8192, steps: int = 2, timeout_s: float = 1800.0,
           threads: int | None = None, exact: bool = False, events: RunEvents | None = None) -> MaxBatch:
    """Double the target's axis from `start` until a probe runs out of memory (or halve it until one fits, where
    `start` itself does not), then bisect to the boundary: to within 1/32 of it (about 3%), or to the exact value
    with `exact`. How much fits depends on the machine (its libraries' own footprint under the cap), so `start`
    is where the search begins, not a floor."""
    events = events or RunEvents()
    check_search(target, framework=framework, start=start, max_batch=max_batch, device=device)
    settings = RunSettings(frameworks=[framework], devices=[device], steps=steps, warmup=1, timeout_s=timeout_s,
                           mem_limit_mb=mem_limit_mb, threads=threads or default_threads(), energy=False, seed=0)
    fp = collect_fingerprint([framework], settings.threads)
    env_id = store.environment_id(fp, identity_hash(fp))
    stored = settings.stored()
    stored = {key: stored[key] for key in STORED_SETTINGS}
    identity: dict[str, Any] = {"framework": framework, "device": device, "params": target.params,
                                "settings": stored}
    identity |= ({"model": target.model} if target.model is not None else
                 {"workload": target.workload, "axis": target.axis})
    filters: dict[str, Any] = {"framework": framework, "device": device, "start": start, "max_batch": max_batch}
    if target.model is None:
        filters |= {"workload": target.workload, "axis": target.axis}
    new_run = NewRun(
        study=MAXBATCH_STUDY, variant=target.label,
        study_hash=hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16],
        study_path="(dlperf maxbatch)", filters=filters, settings=stored, env_id=env_id, n_cases=0,
        derived=derived(fp))
    with open_run(store, new_run) as run:
        out = _search(store, run.run_id, env_id, settings, target, start=start, max_batch=max_batch, exact=exact,
                      events=events)
        if out.stopped is not None:
            run.status = "failed"
    return out


def _search(store: Store, run_id: str, env_id: int, settings: RunSettings, target: Target, *, start: int,
            max_batch: int, exact: bool, events: RunEvents) -> MaxBatch:
    """The doubling and the bisection, each probe stored in run `run_id` as it ends."""
    framework, device, mem_limit_mb = settings.frameworks[0], settings.devices[0], settings.mem_limit_mb
    axis = target.axis
    out = MaxBatch(run_id, None, None)
    events.search_opened(run_id, model=target.label, framework=framework, device=device, mem_limit_mb=mem_limit_mb,
                         axis=axis, sample=target.sample)

    def probe(value: int) -> Probe:
        case = Case(target.workload, framework, device, target.params | {axis: value})
        row = run_case(case, settings, run_id, env_id)
        store.add_result(row)
        peak, _ = row.peak_memory()
        p = Probe(value, row.status, row.reason, peak, row.m.time_per_sample_s)
        out.probes.append(p)
        events.probe_done(value, row)
        return p

    lo: int | None = None  # the largest value that fit so far
    hi: int | None = None  # the smallest that ran out of memory so far

    def narrow(value: int) -> None:
        """Probe `value` and move the bracket, or stop the search on a failure other than memory."""
        nonlocal lo, hi
        p = probe(value)
        if p.status == "ok":
            lo = value
        elif p.status == "oom":
            hi = value
        else:
            out.stopped = f"{axis} {value} ended {p.status}: {p.reason}"

    def close_enough(lo: int, hi: int) -> bool:
        return hi - lo <= (1 if exact else max(1, lo // 32))

    value = start
    while out.stopped is None and hi is None and value <= max_batch:  # doubling
        narrow(value)
        value *= 2
    while out.stopped is None and lo is None and hi is not None and hi > 1:  # halving: --start did not fit
        narrow(hi // 2)
    while out.stopped is None and lo is not None and hi is not None and not close_enough(lo, hi):  # bisection
        narrow((lo + hi) // 2)
    out.largest, out.first_oom = lo, hi
    return out
