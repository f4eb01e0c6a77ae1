"""Settle an error that running out of memory causes among other things.

oneDNN (in PyTorch and TensorFlow on CPUs) says "could not create a primitive"
both when its scratchpad allocation fails and when a layer is unsupported
(`Framework.oom_suspect`). Under a memory cap, the case's own worker flags such
an error; the parent then builds the case in a *fresh* worker with the cap
raised and runs one step. The case counts as out of memory only if that step
runs, or plainly runs out of memory again. A worker that dies of SIGSEGV, SIGABRT
or SIGBUS under a cap is re-checked the same way: native code that does not
check a failed allocation dies like that (seen here: PyTorch with 32 OpenMP
threads under a 600 MiB cap, one run in eight). A re-try in the failed process would
not do: the failed attempt's heap and oneDNN's state stay with it (seen here:
a LeNet-5 step that fails in place under a raised cap runs in a fresh process).
"""

from __future__ import annotations

from dlperf.core.jobs import CaseJob, OneStepJob
from dlperf.core.settings import RunSettings
from dlperf.runner.alloc_failure import died_allocating
from dlperf.runner.process import run_worker
from dlperf.runner.worker_result import WorkerResult

RAISE_FACTOR = 4  # the re-check's cap: this many times the case's, within half the memory free now
# Deaths that an unchecked failed allocation in native code causes (as the worker's crash reason names them).
CRASH_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS")


def is_suspect(result: WorkerResult, settings: RunSettings) -> bool:
    """Whether `result` is a failure under a memory cap that memory may, or may not, have caused."""
    if not settings.mem_limit_mb:
        return False
    if result.get("oom_suspect"):
        return True
    reason = result.get("reason") or ""
    return result.get("status") == "crashed" and any(reason.startswith(f"worker killed by {s}")
                                                     for s in CRASH_SIGNALS)


def raised_cap_mb(cap_mb: int, available_bytes: int | None = None) -> int | None:
    """The re-check's cap in MiB, or None where the machine has no room to raise it."""
    if available_bytes is None:
        import psutil

        available_bytes = int(psutil.virtual_memory().available)
    extra_mb = min(cap_mb * (RAISE_FACTOR - 1), available_bytes // 2 // 2**20)
    return cap_mb + extra_mb if extra_mb > 0 else None


def settle_suspect(job: CaseJob, result: WorkerResult) -> WorkerResult:
    """`result` (an `is_suspect` failure of `job`) with its status settled and the evidence kept."""
    settings = job.settings
    out = result.copy()
    out.pop("oom_suspect", None)
    out["metrics"] = metrics = dict(result.get("metrics") or {})
    assert settings.mem_limit_mb is not None  # is_suspect holds
    cap_mb = settings.mem_limit_mb
    raised = raised_cap_mb(cap_mb)
    if raised is None:
        note = f"may be memory under the {cap_mb} MiB cap; too little free memory to re-check with a raised cap"
        metrics["oom_recheck"] = {"cap_mb": None, "status": None, "note": note}
        out["reason"] = f"{result['reason']} ({note})"
        return out
    check = run_worker(OneStepJob(case=job.case, settings=settings.with_overrides(mem_limit_mb=raised)),
                       timeout_s=settings.timeout_s, threads=settings.threads)
    seen = died_allocating(check.result, raised)
    if seen.get("status") == "ok":
        out["status"] = "oom"
        note = (f"the same step ran in a fresh worker with the cap raised to {raised} MiB, "
                f"so the {cap_mb} MiB cap caused it")
    elif seen.get("status") == "oom":
        out["status"] = "oom"
        note = f"out of memory again in a fresh worker with the cap raised to {raised} MiB: {seen.get('reason')}"
    else:
        what = "crashed" if seen.get("status") == "crashed" else "failed"
        note = (f"{what} again in a fresh worker with the cap raised to {raised} MiB ({seen.get('reason')}), "
                f"so not the {cap_mb} MiB cap")
    out["reason"] = f"{result['reason']} ({note})"
    metrics["oom_recheck"] = {"cap_mb": raised, "status": seen.get("status"), "reason": seen.get("reason"),
                              "peak_rss_bytes": seen.get("peak_rss_bytes"), "wall_s": check.wall_s,
                              "note": note}
    return out
