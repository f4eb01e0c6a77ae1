"""A rank that misbehaves on purpose (job kind `faults`): how the launcher's classification is tested.

`payload["rank_<R>"]` (else `payload["all"]`) says what rank R does: `ok` (one all-reduce, then returns), `sleep`
(longer than any test's time-out), `raise` (a RuntimeError), `oom` (a MemoryError), `exit` (os._exit(3), no
result), `kill` (SIGKILL to itself, no result), `linger` (one all-reduce and its result, then a hang at exit:
torchrun never ends by itself). A `sleep` on one rank is a hang: its peers wait in the all-reduce.
"""

from __future__ import annotations

import atexit
import os
import signal
import time
from typing import Any


def run(spec: Any, *, rank: int, world_size: int, device: str) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    what = spec.payload.get(f"rank_{rank}", spec.payload.get("all", "ok"))
    if what == "sleep":
        time.sleep(3600)
    elif what == "raise":
        raise RuntimeError(f"rank {rank} failed on purpose")
    elif what == "oom":
        raise MemoryError(f"rank {rank} ran out of memory on purpose")
    elif what == "exit":
        os._exit(3)
    elif what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif what == "linger":
        atexit.register(time.sleep, 3600)  # after rank.py wrote the result: a hang in the job's teardown
    t = torch.ones(4, device=device)
    dist.all_reduce(t)
    return {"sum": float(t[0])}
