"""A failed allocation under the worker's memory cap that does not say MemoryError.

Under RLIMIT_DATA a worker can fail while it imports a framework (torch, transformers), before any step runs,
and the failure rarely names memory plainly. Seen on this project's AMD VM importing torch 2.13 under caps
of 150-210 MiB (a cap gives one or another from run to run): `MemoryError` from the import machinery,
`SystemError: error return without exception set` (C code that returned failure without setting the
exception, after a failed allocation), glibc's `cannot allocate memory for thread-local data: ABORT` (the
process exits 127 with no traceback) and `MemoryError: std::bad_alloc`; not seen here but named too, the
dynamic loader's `failed to map segment from shared object` (an ImportError). Under a cap these are the cap's
doing: a search for the largest batch takes such a probe for one too large rather than stopping at it.
Without a cap they stay errors. (One import under a 200 MiB cap spun instead, minutes, until killed: the
worker's time-out ends such a probe as `timeout`, which still stops a search.)
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlperf.runner.worker_result import WorkerResult

#: Words a failed allocation leaves in an exception or in a dead worker's stderr (matched case-insensitively).
ALLOCATION_MARKERS = (
    "memoryerror",
    "error return without exception set",
    "cannot allocate memory",
    "failed to map segment from shared object",
    "std::bad_alloc",
)


def says_allocation_failed(text: str) -> bool:
    """Whether `text` (an exception's line, a worker's stderr tail) names a failed allocation."""
    low = text.lower()
    return any(marker in low for marker in ALLOCATION_MARKERS)


def is_allocation_failure(exc: BaseException) -> bool:
    """Whether `exc` is a failed allocation: MemoryError, an OSError of ENOMEM, or a SystemError / ImportError /
    OSError whose words name one (`ALLOCATION_MARKERS`). Only meaningful under a memory cap."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    return isinstance(exc, SystemError | ImportError | OSError) and says_allocation_failed(
        f"{type(exc).__name__}: {exc}")


def died_allocating(result: WorkerResult, cap_mb: int | None) -> WorkerResult:
    """`result` (a worker's, or one `process.classify_exit` made for a worker that left none) as out of memory
    where the worker exited without a result under the cap `cap_mb` and its stderr names a failed allocation;
    otherwise `result` unchanged. The reason keeps what the worker said."""
    reason = result.get("reason") or ""
    if not cap_mb or result.get("status") != "error" or not reason.startswith("worker exited with code"):
        return result
    if not says_allocation_failed(reason):
        return result
    return {**result, "status": "oom",
            "reason": f"{reason} (a failed allocation under the {cap_mb} MiB memory cap)"}
