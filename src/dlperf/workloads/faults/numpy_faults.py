"""The faults workload in NumPy: ends the way `p.mode` asks, or builds a trivial step (`nap`: one that sleeps)."""

from __future__ import annotations

import os
import signal
import time

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.faults import FaultsParams


def build(fw: Framework, device: str, p: FaultsParams) -> Step:
    np = fw.import_module()
    if p.mode == "raise":
        raise ValueError("deliberate failure from the faults workload")
    if p.mode == "sleep":
        time.sleep(p.sleep_s)
    if p.mode == "signal":
        os.kill(os.getpid(), signal.SIGSEGV)
    if p.mode == "exit":
        os._exit(3)
    if p.mode == "alloc":
        hoard = []
        while True:  # ends in MemoryError under the worker's memory cap
            hoard.append(np.ones(p.chunk_mb * 2**20 // 8))
    if p.mode == "suspect":
        try:
            need = np.empty(p.need_mb * 2**20, dtype=np.uint8)
        except MemoryError:
            if p.fail_as == "signal":
                os.kill(os.getpid(), signal.SIGSEGV)
            raise RuntimeError("could not create a primitive (faults: an allocation failed)") from None
        del need
    if p.mode == "nap":
        return Step(lambda: time.sleep(p.sleep_s))
    x = np.arange(16.0)
    return Step(lambda: x.sum())
