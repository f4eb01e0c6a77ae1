"""Cold and warm compile of the XLA modes (`jax`, `jax-nojit`, `tensorflow-xla`) on the mlp and transformer
workloads, and of the model workload's variants run by them (`xla`, `jit`, JAX's `eager`) (issue 32), as torch's
compiler variants record theirs (`workloads.model.torch_compiled`).

- cold: the case's first call (the timer's `first_call_s`: trace, XLA's compile, the cache's write, the run), in
  the case's worker, with the compiler's persistent cache in a new, empty folder of its own
  (`frameworks.compile_cache`; no two cases or repetitions share one): for `jax`, JAX's persistent compilation
  cache with every executable kept (`JaxFramework.use_compile_cache`); for `tensorflow-xla`, XLA's persistent
  cache (TF_XLA_FLAGS --tf_xla_persistent_cache_directory, `TensorflowXlaFramework.compile_cache`);
- warm (`warm_s`): the same first call (built, then one call and its sync, the garbage collector off, as the timer
  does it) in a second fresh process (`python -m dlperf.workloads.xla_compile`) on the folder as the case left it,
  with the case's seed and thread count;
- what the caches saw (`cold_counters`, `warm_counters`) over the step's calls (the cold: every call the worker
  made, the timed ones too; the warm: its one call): JAX's own monitoring events (`requests`, `hits`, `writes`),
  TensorFlow's files written (XLA writes each executable it compiles to the folder, and nothing on a hit: checked
  here with TensorFlow 2.21); `warm_hit` says whether the warm call came from the cache (JAX: a hit and no write;
  TensorFlow: a filled folder and nothing written);
- `jax-nojit` compiles no step: no persistent cache is set (`use_compile_cache(None)`), so the per-op compiles JAX
  makes as it dispatches stay in its process; the cold compile is its first call and `no_warm` says why there is
  no warm one.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict, cast

from dlperf.frameworks import Framework, get_framework
from dlperf.frameworks.compile_cache import Stamp, cache_folder, run_warm, stamps, warm_main, written
from dlperf.workloads.base import Step, Workload, WorkloadParams

#: The modes whose compile is recorded.
MODES = ("jax", "jax-nojit", "tensorflow-xla")
#: Seconds the warm compile's process may take.
WARM_TIMEOUT_S = 600
#: What the cold compile is, in each record.
COLD = "the case's first call (first_call_s), its compiler cache a new, empty folder"
COLD_NO_CACHE = "the case's first call (first_call_s), with no persistent compiler cache"
NOJIT = ("jax-nojit compiles no step (jit off): the ops JAX compiles one by one as it dispatches them are kept "
         "in its process only, no persistent cache is set, so there is no warm compile to measure")
JAX_CACHE = "JAX's persistent compilation cache (jax_compilation_cache_dir), every executable kept"
TF_CACHE = "XLA's persistent cache (TF_XLA_FLAGS --tf_xla_persistent_cache_directory)"


class CompileRecord(TypedDict, total=False):
    """An XLA mode's compile, stored under `compile` in the case's metrics (module doc; the keys torch's record
    shares mean the same)."""

    mode: str
    cold: str
    cache: str
    no_warm: str
    cache_dir: str
    cold_cache_files_before: int
    cold_cache_files_after: int
    cold_counters: dict[str, int]
    warm_s: float
    warm_cache_files_before: int
    warm_counters: dict[str, int]
    warm_hit: bool
    warm_error: str


@dataclass
class Cache:
    """A case's compiler cache: its folder (None: none), what it is or why there is none, its files when the
    case began, and what it saw before the step's first call (files, JAX's events)."""

    folder: Path | None
    what: str
    files_at_start: int = 0
    before_calls: dict[str, Stamp] = field(default_factory=dict)
    events_before_calls: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class WarmCase:
    """What the warm compile's process builds: the case as the worker built it."""

    workload: str
    framework: str
    device: str
    params: dict[str, Any]
    seed: int | None
    threads: int | None


@dataclass(frozen=True)
class XlaStep(Step):
    """A built step of an XLA mode with its cache and what a warm compile rebuilds."""

    cache: Cache | None = None
    case: WarmCase | None = None


def begin(fw: Framework) -> Cache | None:
    """Before the case is built: its compiler cache (None: `fw` is not an XLA mode)."""
    if fw.name == "jax":
        folder = cache_folder() / "jax"
        folder.mkdir()
        fw.use_compile_cache(folder)  # type: ignore[attr-defined]
        return Cache(folder, JAX_CACHE)
    if fw.name == "jax-nojit":
        fw.use_compile_cache(None)  # type: ignore[attr-defined]
        return Cache(None, NOJIT)
    if fw.name == "tensorflow-xla":
        folder, how = fw.compile_cache()  # type: ignore[attr-defined]
        if folder is None:
            return Cache(None, how)
        return Cache(folder, f"{TF_CACHE}: {how}", files_at_start=len(stamps(folder)))
    return None


def counters(fw: Framework, cache: Cache) -> dict[str, int]:
    """What the cache saw since the step's first call: JAX's events, or TensorFlow's files written."""
    if fw.family == "jax":
        now: dict[str, int] = fw.cache_events()  # type: ignore[attr-defined]
        return {k: v - cache.events_before_calls.get(k, 0) for k, v in now.items()}
    assert cache.folder is not None
    return {"files_written": written(cache.before_calls, stamps(cache.folder))}


def tracked(workload: str, fw: Framework, device: str, params: WorkloadParams, step: Step, cache: Cache | None,
            as_type: type[XlaStep] = XlaStep, **extra: Any) -> Step:
    """`step` as an `as_type` (an XlaStep, or one with more fields, given in `extra`: the model workload's) with
    its cache (as it is now, before the first call) and the case a warm compile rebuilds; `step` itself where
    `fw` is not an XLA mode."""
    if cache is None:
        return step
    if cache.folder is not None:
        cache.before_calls = stamps(cache.folder)
        if fw.family == "jax":
            cache.events_before_calls = fw.cache_events()  # type: ignore[attr-defined]
    case = WarmCase(workload, fw.name, device, params.canonical(), fw.seed_value(), fw.threads())
    return as_type(**{f.name: getattr(step, f.name) for f in fields(Step)}, cache=cache, case=case, **extra)


def build(workload: Workload[Any], fw: Framework, device: str, params: WorkloadParams) -> Step:
    """The workload's step with its compile recorded where `fw` is an XLA mode (its cache set before the build)."""
    cache = begin(fw)
    step = Workload.build(workload, fw, device, params)
    return tracked(workload.name, fw, device, params, step, cache)


def record(step: Step) -> dict[str, CompileRecord]:
    """`{"compile": ...}` for a step of an XLA mode (module doc), after its calls; {} for any other step. The warm
    compile runs here, in a fresh process."""
    if not isinstance(step, XlaStep) or step.cache is None or step.case is None:
        return {}
    cache, case = step.cache, step.case
    if cache.folder is None:
        return {"compile": {"mode": case.framework, "cold": COLD_NO_CACHE, "cache": "none", "no_warm": cache.what}}
    out: CompileRecord = {"mode": case.framework, "cold": COLD, "cache": cache.what}
    fw = get_framework(case.framework)
    out |= {"cache_dir": str(cache.folder), "cold_cache_files_before": cache.files_at_start,
            "cold_cache_files_after": len(stamps(cache.folder)), "cold_counters": counters(fw, cache)}
    return {"compile": out | warm(case, cache.folder)}


def warm(case: WarmCase, folder: Path) -> CompileRecord:
    """The warm compile's figures from a fresh process on the filled `folder` (`main`), or its error."""
    spec = json.dumps({**case.__dict__, "folder": str(folder)})
    env = dict(os.environ)
    if case.framework == "tensorflow-xla":
        from dlperf.frameworks.tensorflow_fw import PERSISTENT_FLAG

        env["TF_XLA_FLAGS"] = f"{env.get('TF_XLA_FLAGS', '')} {PERSISTENT_FLAG}={folder}".strip()
    return cast(CompileRecord, run_warm([sys.executable, "-m", "dlperf.workloads.xla_compile", spec], env,
                                        WARM_TIMEOUT_S))


def hit(framework: str, files_before: int, seen: dict[str, int]) -> bool:
    """Whether the warm call's executable came from the cache: JAX, a hit and no write; TensorFlow, a filled
    folder and nothing written."""
    if framework.startswith("jax"):
        return seen.get("hits", 0) > 0 and seen.get("writes", 0) == 0
    return files_before > 0 and seen.get("files_written", 0) == 0


def _warm(argv: list[str]) -> CompileRecord:
    """The warm compile: `SPEC_JSON` (a `WarmCase` and its `folder`); its figures (`main` prints them)."""
    from dlperf.workloads.registry import get_workload  # filled: running this module imported the package

    spec = json.loads(argv[1])
    folder = Path(spec.pop("folder"))
    case = WarmCase(**spec)
    fw = get_framework(case.framework)
    fw.import_module()  # tensorflow-xla: TensorFlow reads TF_XLA_FLAGS (the parent named `folder` in it)
    device = fw.check_device(case.device)
    if case.threads:
        fw.set_threads(case.threads)
    if case.seed is not None:
        fw.seed(case.seed)
    if case.framework == "jax":
        fw.use_compile_cache(folder)  # type: ignore[attr-defined]
    elif fw.compile_cache()[0] != folder:  # type: ignore[attr-defined]
        raise RuntimeError(f"TensorFlow's XLA cache is not {folder}: {fw.compile_cache()[1]}")  # type: ignore[attr-defined]
    cache = Cache(folder, "", files_at_start=len(stamps(folder)))
    workload = get_workload(case.workload)
    built = Workload.build(workload, fw, device, workload.parse(case.params))
    fn, sync = fw.prepare(built.fn, device)
    cache.before_calls = stamps(folder)
    if fw.family == "jax":
        cache.events_before_calls = fw.cache_events()  # type: ignore[attr-defined]
    gc.collect()
    gc.disable()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    warm_s = time.perf_counter() - start
    gc.enable()
    seen = counters(fw, cache)
    out: CompileRecord = {"warm_s": warm_s, "warm_cache_files_before": cache.files_at_start,
                          "warm_counters": seen, "warm_hit": hit(case.framework, cache.files_at_start, seen)}
    return out


def main(argv: list[str]) -> int:
    """The warm compile's process: its figures as one JSON line, or why not (`compile_cache.warm_main`)."""
    return warm_main(_warm, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
