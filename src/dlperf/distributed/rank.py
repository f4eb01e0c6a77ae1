"""What every rank of a dlperf torchrun job runs: `python -m dlperf.distributed.rank SPEC` (torchrun starts it).

It dies with torchrun (`PR_SET_PDEATHSIG`), writes its pid (so the launcher can stop it), sets its thread count,
joins the process group (gloo on CPUs; NCCL on GPUs, rank r on `cuda:LOCAL_RANK`) with the job's time-out, calls
the rank function of the job's kind (`launch.RANK_KINDS`: `run(spec, rank=, world_size=, device=) -> dict`)
and writes `rank<R>.json` atomically: `{"status": "ok", ...what run returned}` or, on any exception, `oom`
(MemoryError, torch's out-of-memory errors), `unsupported` (UnsupportedError) or `error`, with a one-line
reason and the traceback; `stopped` where SIGTERM (torchrun stopping the job) ended it. Every result also
carries rank, pid, host, peak RSS, the device allocator's peak (CUDA: torch.cuda.max_memory_allocated; None on
CPUs) and when it finished.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from dlperf.distributed.launch import RANK_KINDS, STOPPED, RankSpec
from dlperf.distributed.records import RankResult
from dlperf.errors import exception_line

PR_SET_PDEATHSIG = 1


class Stopped(BaseException):
    """SIGTERM: torchrun (or the launcher) stops this rank, after another rank failed or at the time-out."""


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    raise Stopped("stopped by SIGTERM (torchrun stops the other ranks when one fails)")


#: What the command line of a rank's parent holds while the parent is torchrun (`launch.torchrun_argv`).
TORCHRUN_MARK = b"torch.distributed.run"


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent (torchrun) ends, so no rank outlives its job. Where
    torchrun ended before that took effect (its worker killed while it was starting ranks), this rank was
    handed to init and would wait in init_process_group for minutes: it exits at once."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the launcher still kills the ranks' process groups
    if not parent_is_torchrun():
        os._exit(1)


def parent_is_torchrun() -> bool:
    """Whether this process's parent is torchrun (read after PR_SET_PDEATHSIG is set: a parent that ends later
    kills this process; one that ended before left init, or a subreaper, as the parent). True where /proc
    cannot tell."""
    try:
        cmdline = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return True
    return TORCHRUN_MARK in cmdline


def peak_rss_bytes() -> int | None:
    """This rank's peak resident set (VmHWM), None where /proc is absent."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_device_mem_bytes(spec: RankSpec, local_rank: int) -> int | None:
    """This rank's CUDA allocator peak (torch.cuda.max_memory_allocated on its GPU); None on CPUs, or where CUDA
    was never initialised in this rank (it failed before; reading would create a context)."""
    if spec.device != "cuda":
        return None
    try:
        import torch

        if not torch.cuda.is_initialized():
            return None
        return int(torch.cuda.max_memory_allocated(f"cuda:{local_rank}"))
    except Exception:
        return None


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's garbage collector collected, then off for the block (a rank's timed steps or blocks), as the
    house's timer does (`timing.timer.measure`): a collection inside a timed step is the collector's time, not
    the step's. Restored after (on only where it was on)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def failure_status(exc: BaseException) -> str:
    """oom, unsupported or error, for an exception a rank ended with."""
    from dlperf.frameworks import UnsupportedError

    if isinstance(exc, UnsupportedError):
        return "unsupported"
    if isinstance(exc, MemoryError):
        return "oom"
    text = str(exc).lower()
    if type(exc).__name__ == "OutOfMemoryError" or (isinstance(exc, RuntimeError) and "out of memory" in text):
        return "oom"
    return "error"


def join(spec: RankSpec, local_rank: int) -> str:
    """Set threads and device, join the process group; the device this rank computes on."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(spec.threads_per_rank)
    device = "cpu"
    kwargs: dict[str, Any] = {"timeout": timedelta(seconds=spec.timeout_s)}
    if spec.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
        kwargs["device_id"] = torch.device(device)
    dist.init_process_group(spec.backend, **kwargs)
    return device


def main(argv: list[str]) -> int:
    die_with_parent()
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    spec = RankSpec.model_validate_json(Path(argv[1]).read_text())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    base = Path(spec.result_dir)
    (base / f"rank{rank}.pid").write_text(str(os.getpid()))
    out: RankResult
    try:
        device = join(spec, local_rank)
        module = importlib.import_module(RANK_KINDS[spec.kind])
        out = {"status": "ok", "reason": None} | module.run(spec, rank=rank, world_size=world, device=device)
    except Stopped as exc:
        out = {"status": STOPPED, "reason": str(exc)}
    except BaseException as exc:
        out = {"status": failure_status(exc), "reason": exception_line(exc), "traceback": traceback.format_exc(limit=8)}
    out |= {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "peak_rss_bytes": peak_rss_bytes(),
            "peak_device_mem_bytes": peak_device_mem_bytes(spec, local_rank), "finished_at": time.time()}
    tmp = base / f".rank{rank}.json.tmp"
    tmp.write_text(json.dumps(out, default=str))
    tmp.replace(base / f"rank{rank}.json")
    if out["status"] == "ok":
        try:
            import torch.distributed as dist

            dist.destroy_process_group()
        except Exception:
            pass
    return 0 if out["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
