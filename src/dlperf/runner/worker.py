"""The worker: runs one case (or collects the fingerprint) in a fresh process.

Invoked as `python -m dlperf.runner.worker JOB.json`. It reads the job (a
`dlperf.core.jobs.Job`), does the work, and writes its result JSON atomically to
the path the job names.
Anything that kills it before that (a signal, the OOM killer, a time-out) is
classified by the parent from the exit status; nothing here needs to survive it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.core.jobs import CaseJob, CaseSpec, CeilingsJob, CountersJob, FingerprintJob, OneStepJob, ProbeJob, read_job
from dlperf.core.settings import RunSettings
from dlperf.errors import exception_line
from dlperf.runner.alloc_failure import is_allocation_failure
from dlperf.runner.driven import Footprint
from dlperf.runner.parent_watch import die_with_parent
from dlperf.runner.worker_result import FrameworkProbe, WorkerResult
from dlperf.timing.config import TimerConfig

if TYPE_CHECKING:  # the meters are imported where a case measures energy, not when the worker starts
    from dlperf.meters.window import EnergyResult

#: Seconds of machine activity recorded just before and just after a case's measurement (the worker idle).
ACTIVITY_WINDOW_S = 0.1


def _limit_memory(mem_limit_mb: int | None) -> None:
    """Cap the worker's data segment (heap and private mappings) so OOM is catchable.

    RLIMIT_DATA rather than RLIMIT_AS: address-space reservations (CUDA, JIT
    code caches) are not counted, real allocations are.
    """
    if mem_limit_mb:
        limit = int(mem_limit_mb) * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def peak_rss_bytes(status: Path = Path("/proc/self/status")) -> int:
    """Peak resident set of this worker's own address space.

    Linux's VmHWM, which exec resets. Not ru_maxrss: Linux carries that across
    exec, so a worker spawned by a large process (a notebook, a test runner)
    would report its parent's RSS as its own peak. ru_maxrss (KiB) is the
    fallback where /proc is absent.
    """
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def oom_reason(exc: BaseException, case_dtype: Any) -> str:
    """An out-of-memory reason in the case's own dtype: where the failed allocation names another dtype
    (NumPy's "... and data type float32" in a float16 case, whose inputs are drawn in float32 and then cast),
    the reason says that array was an intermediate, so it never reads as if the case ran in that dtype."""
    import re

    text = exception_line(exc)
    named = re.search(r"data type (\w+)", text)
    if isinstance(case_dtype, str) and named and named.group(1) != case_dtype:
        return f"{text} (a {named.group(1)} intermediate of this {case_dtype} case, not one of its {case_dtype} arrays)"
    return text


def run_case(job: CaseJob) -> WorkerResult:
    """Build the workload on the framework and device, measure it, derive metrics."""
    from dlperf.core.status import CaseEnded
    from dlperf.core.validity import assess
    from dlperf.frameworks import UnsupportedError, get_framework
    from dlperf.meters.activity import Monitor
    from dlperf.runner.derive import derive_metrics
    from dlperf.runner.driven import is_driven, run_driven
    from dlperf.timing import measure
    from dlperf.workloads import get_workload

    case, settings = job.case, job.settings
    fw = get_framework(get_workload(case.workload).adapter(case.framework, case.params))  # a variant's mode
    try:
        fw.import_module()
        device = fw.check_device(case.device)
    except UnsupportedError as exc:
        return {"status": "unsupported", "reason": str(exc)}
    except Exception as exc:  # a failed allocation under the cap, or a broken install
        return import_failed(fw.name, exc, settings.mem_limit_mb)
    try:
        _configure(fw, settings)
        # The framework's own footprint before the workload exists, which memory estimates add to theirs.
        baseline_rss = peak_rss_bytes()
        workload = get_workload(case.workload)
        params = workload.parse(case.params)
        built = workload.build(fw, device, params)
        if is_driven(workload):  # it measures itself (LoadGen, a torchrun job): drive is called once
            driven, measured = run_driven(fw, device, workload, params, built, settings)
            own = driven if workload.runs_in_own_processes else None  # a torchrun job: its ranks' memory
            return {"status": "ok", "reason": None, "measurement": measured,
                    "metrics": {**driven, **_footprint(fw, device, baseline_rss, own)}}
        fn, sync = fw.prepare(built.fn, device)
        fw.reset_peak_memory(device)
        monitor = Monitor()
        monitor.idle_window("before", ACTIVITY_WINDOW_S)
        monitor.start("during", top=True)
        per_call = settings.per_call or workload.per_call_timing(params)
        m = measure(fn, _timing(settings, per_call), sync=sync, device_timer=fw.device_timer(device))
        monitor.stop("during")
        # Read before anything calls the step again (energy, profiles): the timer's calls are the last ones.
        phases = _phases(built, m, case.params)
        monitor.idle_window("after", ACTIVITY_WINDOW_S)
        peak_dev, peak_dev_how = fw.peak_memory_bytes(device)
        peak_rss = peak_rss_bytes()  # the timed work's: not what the checks below add (a reference's copies)
        metrics: dict[str, Any] = {**derive_metrics(m, workload.built_cost(params, built)), **phases}
        metrics |= workload.extra_metrics(params, built)  # e.g. the model workload's correctness gate
        metrics["activity"] = monitor.record()  # cpu_util came with the measurement's summary
        metrics["validity"], metrics["validity_reason"] = assess(m, metrics["activity"], threads=fw.threads(),
                                                                 device=case.device)
        metrics["energy"] = _energy(settings, device, fn, sync, m.median_s)
        if settings.profile:
            from dlperf.profiling.cprof import profile

            metrics["profile"] = profile(built.profile or fn)
            try:
                metrics["kernels"] = fw.kernel_profile(fn, sync, device)
            except UnsupportedError:
                pass  # this framework has no kernel profiler here; the Python profile stands alone
            except Exception as exc:  # a profiler failure is recorded, the timing stands
                metrics["kernels_error"] = exception_line(exc)
        steps = workload.steps_per_epoch(params)
        if steps is not None:
            metrics["steps_per_epoch"] = steps
            metrics["time_per_epoch_s_derived"] = m.median_s * metrics["steps_per_epoch"]
        if settings.energy_estimate_tdp_w:
            metrics["energy_estimate"] = _tdp_estimate(settings.energy_estimate_tdp_w, device, fn, sync, m.median_s)
        metrics.update(
            peak_rss_bytes=peak_rss,
            baseline_rss_bytes=baseline_rss,
            peak_device_mem_bytes=peak_dev,
            peak_device_mem_source=peak_dev_how,
            threads=fw.threads(),
            device=device,
        )
        return {"status": "ok", "reason": None, "measurement": m.to_dict(), "metrics": metrics}
    except UnsupportedError as exc:
        return {"status": "unsupported", "reason": str(exc)}
    except CaseEnded as exc:  # the case's own processes (a torchrun job) ended it: their status, not an error
        return {"status": exc.status, "reason": exc.reason, "metrics": exc.metrics}
    except BaseException as exc:
        oom = _is_oom(fw, exc, settings.mem_limit_mb)
        result: WorkerResult = {
            "status": "oom" if oom else "error",
            "reason": oom_reason(exc, case.params.get("dtype")) if oom else exception_line(exc),
            "metrics": {"traceback": traceback.format_exc(limit=8), "peak_rss_bytes": peak_rss_bytes()},
        }
        if not oom and settings.mem_limit_mb and _asks(fw.oom_suspect, exc):
            result["oom_suspect"] = True  # the parent re-checks it in a fresh worker (runner.recheck)
        return result


def _footprint(fw: Any, device: str, baseline_rss: int, own_processes: dict[str, Any] | None = None) -> Footprint:
    """Memory, threads and device as the worker saw them at the end of the case; for a case run in its own
    processes (`own_processes`: the drive's metrics), their memory (`runner.driven.processes_footprint`)."""
    out: Footprint = {"baseline_rss_bytes": baseline_rss, "threads": fw.threads(), "device": device}
    if own_processes is not None:
        from dlperf.runner.driven import processes_footprint

        return out | processes_footprint(own_processes, peak_rss_bytes())
    peak_dev, peak_dev_how = fw.peak_memory_bytes(device)
    return out | {"peak_rss_bytes": peak_rss_bytes(), "peak_device_mem_bytes": peak_dev,
                  "peak_device_mem_source": peak_dev_how}


def _configure(fw: Any, settings: RunSettings) -> None:
    """The case's thread count (where set) and seed, before anything is built."""
    if settings.threads:
        fw.set_threads(settings.threads)
    fw.seed(settings.seed)


def _is_oom(fw: Any, exc: BaseException, cap_mb: int | None) -> bool:
    """The framework's out-of-memory error, or under a cap any failed allocation (`alloc_failure`: importing a
    module the workload needs, transformers say, can fail as a SystemError or an ImportError)."""
    return isinstance(exc, MemoryError) or _asks(fw.is_oom, exc) or bool(cap_mb and is_allocation_failure(exc))


def import_failed(framework: str, exc: BaseException, cap_mb: int | None) -> WorkerResult:
    """The result of a worker that could not import `framework` (or open its device): out of memory where a
    memory cap is set and `exc` is a failed allocation, else an error; under a cap an error that is not
    plainly one is re-checked by the parent with the cap raised (runner.recheck); the reason keeps `exc`'s."""
    where = f"importing {framework}" + (f" under the {cap_mb} MiB memory cap" if cap_mb else "")
    oom = bool(cap_mb) and is_allocation_failure(exc)
    result: WorkerResult = {"status": "oom" if oom else "error", "reason": f"{exception_line(exc)} ({where})",
                            "metrics": {"traceback": traceback.format_exc(limit=8),
                                        "peak_rss_bytes": peak_rss_bytes()}}
    if cap_mb and not oom:
        result["oom_suspect"] = True
    return result


def _asks(check: Any, exc: BaseException) -> bool:
    """A framework's verdict on `exc`, False where asking it fails."""
    try:
        return bool(check(exc))
    except Exception:
        return False


def _prepared_step(fw: Any, device: str, case: CaseSpec) -> tuple[Any, Any]:
    """(step, sync) of the case's workload, built and prepared on `device`: untimed runs (re-check, counters)."""
    from dlperf.workloads import get_workload

    workload = get_workload(case.workload)
    return fw.prepare(workload.build(fw, device, workload.parse(case.params)).fn, device)


def run_one_step(job: OneStepJob) -> WorkerResult:
    """Build the case and run one step, untimed: whether it runs at all under this cap."""
    from dlperf.frameworks import get_framework

    case = job.case
    fw = get_framework(case.framework)
    try:
        fw.import_module()
        device = fw.check_device(case.device)
        _configure(fw, job.settings)
        fn, sync = _prepared_step(fw, device, case)
        fn()
        sync()
    except BaseException as exc:
        oom = _is_oom(fw, exc, job.settings.mem_limit_mb)
        return {"status": "oom" if oom else "error",
                "reason": oom_reason(exc, case.params.get("dtype")) if oom else exception_line(exc),
                "peak_rss_bytes": peak_rss_bytes()}
    return {"status": "ok", "peak_rss_bytes": peak_rss_bytes()}


def _timing(settings: RunSettings, per_call: bool = False) -> TimerConfig:
    """The timer's config: the adaptive stop, or with `steps` exactly that many single-call samples; in per-call
    mode (the study's `per_call`, or the workload's `per_call_timing`) single calls and the per-call minimum of
    samples (`timing.defaults.PER_CALL_MIN_SAMPLES`) before the same stop rules (`steps` still means exactly
    that many)."""

    if settings.steps:
        return TimerConfig(warmup=settings.warmup, per_call=per_call, block_size=1, min_samples=settings.steps,
                           max_samples=settings.steps, min_run_time_s=0.0, max_time_s=float("inf"))
    return TimerConfig(warmup=settings.warmup, per_call=per_call, min_run_time_s=settings.min_run_time_s,
                       max_time_s=settings.budget_s, target_rel_ci=settings.target_rel_ci)


def _phases(built: Any, m: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The step's own phases (`Step.call_phases`), raw, mapped to the timer's calls (`core.phases.split_calls`),
    and generation's figures from them; {} for a step that records none."""
    if built.call_phases is None:
        return {}
    from dlperf.core.phases import generation_metrics, split_calls

    calls = split_calls(built.call_phases(), m.warmup_iters, m.total_iters)
    out: dict[str, object] = dict(calls)
    if "call_phases" in calls:
        out |= generation_metrics(calls["first_call_phases"], calls["call_phases"], int(params.get("batch") or 1),
                                  params.get("new_tokens"))
    return out


def _energy(settings: RunSettings, device: str, fn: Any, sync: Any, per_call_s: float) -> EnergyResult:
    """Energy per call from the device's meter, or "not measured" with the reason (never a guess)."""
    if not settings.energy:
        return {"measured": False, "reason": "energy measurement switched off for this study (energy: false)"}
    from dlperf.meters import make_meter
    from dlperf.meters.window import measure_energy

    return measure_energy(make_meter(device), fn, sync, per_call_s=per_call_s)


def _tdp_estimate(tdp_w: float, device: str, fn: Any, sync: Any, per_call_s: float,
                  window_s: float = 1.0) -> dict[str, Any]:
    """Only when asked: TDP x this process's CPU utilisation over a ~1 s window of calls. An estimate."""
    import math
    import time

    import psutil

    from dlperf.meters.estimate import tdp_estimate

    if device != "cpu":
        return {"kind": "estimate", "error": "the TDP estimate models CPUs only; a GPU needs its meter (NVML)"}
    calls = max(1, math.ceil(window_s / max(per_call_s, 1e-9)))
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    est = tdp_estimate(tdp_w=tdp_w, cpu_time_s=cpu, wall_s=wall, cores=psutil.cpu_count(logical=False) or 1)
    return est | {"calls": calls, "energy_per_call_j": est["energy_j"] / calls}


def collect_fingerprint(job: FingerprintJob) -> WorkerResult:
    from dlperf.hardware.identity import fingerprint

    return {"status": "ok", "fingerprint": fingerprint(job.frameworks, job.threads)}


def measure_ceilings(job: CeilingsJob) -> WorkerResult:
    """The run's ceilings per memory level and its GEMM FLOP/s (runner.ceilings)."""
    from dlperf.runner.ceilings import measure_in_worker

    return measure_in_worker(job)


def run_counted(job: CountersJob) -> WorkerResult:
    """Run the case's step under Nsight Compute: one warm call, then `calls` calls inside
    the NVTX range ncu is told to profile. Nothing is timed here."""
    from dlperf.frameworks import get_framework
    from dlperf.profiling.ncu import NVTX_RANGE

    case = job.case
    fw = get_framework(case.framework)
    fw.import_module()
    device = fw.check_device(case.device)
    fn, sync = _prepared_step(fw, device, case)
    try:
        import nvtx
    except ImportError:
        return {"status": "error", "reason": "the nvtx package is needed for --counters: pip install -e '.[gpu]'"}
    fn()
    sync()
    with nvtx.annotate(NVTX_RANGE):
        for _ in range(job.calls):
            fn()
        sync()
    return {"status": "ok"}


def probe_frameworks(job: ProbeJob) -> WorkerResult:
    """Version and devices of every registered framework (for `dlperf doctor`)."""
    from dlperf.frameworks import REGISTRY

    out: dict[str, FrameworkProbe] = {}
    for name, cls in sorted(REGISTRY.items()):
        fw = cls()
        if not fw.available():
            out[name] = {"installed": False, "hint": fw.install_hint}
            continue
        try:
            out[name] = {"installed": True, "version": fw.version, "devices": fw.devices()}
        except Exception as exc:  # a broken install is reported, not fatal
            out[name] = {"installed": True, "version": fw.version, "error": exception_line(exc)}
    return {"status": "ok", "frameworks": out}


def write_result(path: str, result: WorkerResult) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, path)  # atomic: the parent sees a whole result or none


#: The handler of each job type: the worker's whole dispatch.
HANDLERS: dict[type[Any], Callable[[Any], WorkerResult]] = {
    CaseJob: run_case,
    OneStepJob: run_one_step,
    CountersJob: run_counted,
    FingerprintJob: collect_fingerprint,
    CeilingsJob: measure_ceilings,
    ProbeJob: probe_frameworks,
}


def main(argv: list[str]) -> int:
    job = read_job(Path(argv[1]).read_bytes())
    if job.parent_pid is None or job.result_path is None:
        raise SystemExit("a worker job needs parent_pid and result_path (runner.process.run_worker sets them)")
    die_with_parent(job.parent_pid)
    _limit_memory(job.mem_limit_mb)
    result = HANDLERS[type(job)](job)
    write_result(job.result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
