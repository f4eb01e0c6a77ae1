"""The model workload's torch compiler variants (`variants.VARIANTS`): torch.compile (inductor, in a mode), tasks
infer and train, or torch.export compiled ahead of time by AOTInductor into a package and loaded back, task infer.

Task infer runs the compiled callable as eager runs the module (`calls`); task train runs eager's training step
(`training.sgd_step`) with the compiled module as its forward: AOTAutograd compiles the backward with it, the loss
and the SGD step stay as eager's. export of a training step and compiled generation are not built (`check`).

The timer measures the compiled callable's steady state as it does the eager module's. Beside it, a case
records under `compile` in its metrics:
- `cold_s`: the first call, which compiles (train: the first step, which compiles the forward and the backward;
  export: export, package and load, then the call), in the case's
  worker with every on-disk cache of inductor (TORCHINDUCTOR_CACHE_DIR: the FX graph cache, AOTAutograd's, the
  compiled kernels; and TRITON_CACHE_DIR) in a folder of its own, new and empty (`cache_folder`:
  `$TMPDIR/dlperf-compile-*`, removed when the worker ends, or by the next dlperf when the worker was killed):
  no two cases or repetitions share one. torch's precompiled C++ headers stay where torch keeps them for every
  model (`$TMPDIR/torchinductor_$USER`), as torch's own `fresh_cache` leaves them (they depend on the C++
  compiler and its flags, not on the model); `headers` says whether the cold compile found them or built them;
- `warm_s`: the same in a second fresh process (`python -m dlperf.workloads.model.torch_compiled`) with that
  folder as the cold compile left it;
- `cold_counters` / `warm_counters`: the caches' own hit and miss counts in each (a warm compile that hit
  nothing did not use the cache; a cold one that hit anything shared one);
- `graph_breaks`, `graphs`, `break_reasons` (torch.compile variants): `torch._dynamo.explain` on the eager module's
  forward (task train too: the forward's breaks are the backward's) in the warm process, after its timed compile:
  how many breaks, and each one's reason and place in the source;
- the correctness gate (`correctness`): infer, on the compiled callable's outputs against the eager fp32
  reference; train, on the first (cold) step's loss, gradients and updated weights against one eager step from
  the same weights (`training.judge_step`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.frameworks.compile_cache import CACHE_PREFIX, cache_folder, files_in, run_warm, warm_main
from dlperf.sources import Loaded
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams, gate, training
from dlperf.workloads.model import prepare as prep
from dlperf.workloads.model.check import OFFLINE
from dlperf.workloads.model.gate import Verdict
from dlperf.workloads.model.records import BreakReason, CompileRecord, ModelInfo
from dlperf.workloads.model.step import ModelStep, first_output
from dlperf.workloads.model.variants import inductor_mode

__all__ = ["CACHE_PREFIX", "build", "cache_env", "cache_folder", "check", "files_in", "main"]

#: Seconds the warm compile's process may take.
WARM_TIMEOUT_S = 900
#: The cache counters recorded (torch._dynamo.utils.counters: group -> names).
COUNTERS = {"inductor": ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass"),
            "aot_autograd": ("autograd_cache_hit", "autograd_cache_miss")}

def cache_env(folder: Path) -> dict[str, str]:
    """The environment that puts inductor's and triton's on-disk caches in `folder`."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"), "TRITON_CACHE_DIR": str(folder / "triton")}


def check(p: ModelParams, dev_type: str, torch: Any) -> None:
    """UnsupportedError with the reason where this variant cannot run this case here (`torch_model.build` asks
    before it builds anything)."""
    if p.task == "generate":
        raise UnsupportedError(f"variant {p.variant} runs tasks infer and train, not generate: dlperf compiles a "
                               "forward or a training step, not a decoding loop whose KV cache grows every token")
    if p.variant == "export" and p.task != "infer":
        raise UnsupportedError(f"variant export runs task infer only, not {p.task}: torch.export captures a forward "
                               "for AOTInductor; an exported training step is not what dlperf builds")
    if p.variant == "compile:reduce-overhead" and dev_type != "cuda":
        raise UnsupportedError(f"variant {p.variant} records CUDA graphs: CUDA only, not {dev_type}")
    if p.variant == "export":
        inductor = getattr(torch, "_inductor", None)
        if not hasattr(torch, "export") or not hasattr(inductor, "aoti_compile_and_package"):
            raise UnsupportedError(f"variant export needs torch.export and AOTInductor packages (torch "
                                   f"{torch.__version__} has not both)")
        if p.precision != "fp32":
            raise UnsupportedError(f"variant export runs the exported fp32 graph; {p.precision} autocast is "
                                   "not captured by torch.export")


def autocast_dtype(torch: Any, p: ModelParams) -> Any:
    """The autocast dtype of the case's precision (None: fp32), as eager's (`torch_model.build`)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p.precision)


def calls(torch: Any, net: Any, loaded: Loaded, args: Any, kwargs: Any, p: ModelParams,
          dev_type: str) -> Callable[[Any], Any]:
    """`call(fn)`: one call of the task through the variant's callable `fn` of `net`: infer, `fn(*args, **kwargs)`
    under inference mode (and autocast); train, one SGD step of `net` with `fn` as its forward (`net` is put in
    train mode), returning the loss."""
    low = autocast_dtype(torch, p)
    if p.task == "train":
        return training.sgd_step(torch, net, loaded, args, kwargs, dev_type, low)

    def call(fn: Any) -> Any:
        with torch.inference_mode(), torch.autocast(dev_type, dtype=low, enabled=low is not None):
            return fn(*args, **kwargs)

    return call


def compiled(torch: Any, net: Any, args: Any, kwargs: Any, p: ModelParams, folder: Path, name: str) -> Any:
    """The variant's callable of `net` (export: exported, packaged as `folder/<name>.pt2` and loaded back)."""
    if p.variant != "export":
        return torch.compile(net, mode=inductor_mode(p.variant))
    try:
        with torch.no_grad():
            program = torch.export.export(net, tuple(args), kwargs=dict(kwargs))
        path = torch._inductor.aoti_compile_and_package(program, package_path=str(folder / f"{name}.pt2"))
        return torch._inductor.aoti_load_package(path)
    except Exception as exc:
        raise UnsupportedError(f"torch.export + AOTInductor could not compile {p.source}: {type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:200]}") from None


def counters(torch: Any) -> dict[str, int]:
    """The cache counters (`COUNTERS`) of this process so far."""
    from torch._dynamo.utils import counters as all_counters

    return {name: int(all_counters[group][name]) for group, names in COUNTERS.items() for name in names
            if all_counters[group][name]}


def first_call(torch: Any, net: Any, args: Any, kwargs: Any, p: ModelParams, folder: Path, name: str,
               call: Callable[[Any], Any], sync: Callable[[], None]) -> tuple[Any, Any, float]:
    """(callable, its first output, seconds from making the callable to that output): the compile."""
    os.environ.update(cache_env(folder))
    start = time.perf_counter()
    fn = compiled(torch, net, args, kwargs, p, folder, name)
    out = call(fn)
    sync()
    return fn, out, time.perf_counter() - start


def header_files() -> int:
    """Files in torch's precompiled-header folder (kept for every model; module doc)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return files_in(Path(default_cache_dir()) / "precompiled_headers")


def build(torch: Any, fw: Framework, device: str, p: ModelParams, net: Any, loaded: Loaded, args: Any,
          kwargs: Any, reference: list[Any], verdict: Verdict | None, info: ModelInfo,
          seed: int) -> Step:
    """The compiled variant's step, its cold and warm compile recorded (module doc); infer: `reference` is eager's
    fp32 output; train: eager's step is run here (`training.reference`) and FLOPs are counted on it."""
    dev_type = torch.device(device).type
    sync = fw.sync_fn(device)
    call = calls(torch, net, loaded, args, kwargs, p, dev_type)
    if p.task == "train":
        low = autocast_dtype(torch, p)
        reference, verdict_step, twin = training.reference(torch, net, loaded, args, kwargs, dev_type, low)
        verdict = verdict or verdict_step
        eager_step = training.sgd_step(torch, twin, loaded, args, kwargs, dev_type, low)
        info["flops_per_call"] = prep.count_flops(torch, lambda: eager_step(twin))
        info["loss"] = "the source's loss(outputs, batch)" if loaded.loss else "default_loss"

    folder = cache_folder()
    headers_before = header_files()
    before = files_in(folder / "inductor")
    fn, out, cold_s = first_call(torch, net, args, kwargs, p, folder, "cold", call, sync)
    if p.task == "train" and verdict is None:  # the cold step, from the weights eager's step started from
        verdict = training.judge_step(torch, net, out, reference, p.precision)
    headers_after = header_files()
    record: CompileRecord = {
        "variant": p.variant, "cache_dir": str(folder), "cold_s": cold_s, "cold_cache_files_before": before,
        "cold_cache_files_after": files_in(folder / "inductor"), "cold_counters": counters(torch),
        "headers": "built by the cold compile" if headers_after > headers_before else
                   "found (torch keeps them for every model)" if headers_after else "not used"}
    record |= warm(p, seed, device, torch.get_num_threads(), folder)
    last: list[Any] = [None]

    def step() -> Any:
        last[0] = call(fn)
        return last[0]

    def checked() -> Verdict:
        if verdict is not None:
            return verdict
        return gate.judge(prep.as_numpy(torch, step()), reference, p.precision)

    return ModelStep(step, lambda: first_output(torch, last[0]),
                     info=info | {"compile": record, "variant": p.variant, "gate": checked})


def warm(p: ModelParams, seed: int, device: str, threads: int, folder: Path) -> CompileRecord:
    """The warm compile's figures from a fresh process on the filled `folder` (`main`), or its error."""
    argv = [sys.executable, "-m", "dlperf.workloads.model.torch_compiled", p.model_dump_json(), str(seed), device,
            str(threads), str(folder)]
    return cast(CompileRecord, run_warm(argv, os.environ | OFFLINE | cache_env(folder), WARM_TIMEOUT_S))


def graph_breaks(torch: Any, net: Any, args: Any, kwargs: Any) -> CompileRecord:
    """How many graph breaks torch._dynamo.explain finds in `net` at these inputs, and where and why."""
    with torch.no_grad():
        found = torch._dynamo.explain(net)(*args, **kwargs)
    reasons: list[BreakReason] = []
    for brk in found.break_reasons:
        lines = [line.strip() for line in str(brk.reason).splitlines() if line.strip()]
        said = " ".join(lines[:2])[:300]
        frame = brk.user_stack[-1] if brk.user_stack else None
        where = f"{frame.filename}:{frame.lineno} in {frame.name}" if frame is not None else None
        reasons.append({"reason": said, "where": where})
    return {"graph_breaks": int(found.graph_break_count), "graphs": int(found.graph_count),
            "break_reasons": reasons}


def _warm(argv: list[str]) -> CompileRecord:
    """The warm compile: `PARAMS_JSON SEED DEVICE THREADS FOLDER`; its figures (`main` prints them)."""
    import torch

    p = ModelParams.model_validate_json(argv[1])
    seed, device, threads, folder = int(argv[2]), argv[3], int(argv[4]), Path(argv[5])
    torch.set_num_threads(threads)
    pr = prep.prepare(torch, p, seed)
    net = pr.module.to(device).eval()
    args, kwargs = prep.to_device(torch, pr.args, device), prep.to_device(torch, pr.kwargs, device)
    dev_type = torch.device(device).type
    call = calls(torch, net, pr.loaded, args, kwargs, p, dev_type)

    def sync() -> None:
        if dev_type == "cuda":
            torch.cuda.synchronize(device)

    before = files_in(folder / "inductor")
    _, _, warm_s = first_call(torch, net, args, kwargs, p, folder, "warm", call, sync)
    out: CompileRecord = {"warm_s": warm_s, "warm_cache_files_before": before, "warm_counters": counters(torch)}
    if p.variant != "export":
        try:
            out |= graph_breaks(torch, net, args, kwargs)
        except Exception as exc:  # the warm compile's figures stand without them
            out["graph_breaks_error"] = f"torch._dynamo.explain raised {type(exc).__name__}: " \
                                        f"{' '.join(str(exc).split())[:200]}"
    return out


def main(argv: list[str]) -> int:
    """The warm compile's process: its figures as one JSON line, or why not (`compile_cache.warm_main`)."""
    return warm_main(_warm, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
