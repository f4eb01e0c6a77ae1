"""`measure()`: warm-up apart, calibrated blocks, device sync at every edge, adaptive stop."""

from __future__ import annotations

import gc
import itertools
import math
import time
from collections.abc import Callable
from typing import Protocol

from dlperf.timing import defaults
from dlperf.timing.measurement import Measurement
from dlperf.timing.stats import median_ci, quantile

Clock = Callable[[], float]

#: The block size is chosen so timer overhead stays below this fraction of a sample.
MAX_OVERHEAD_FRACTION = 1e-3


class DeviceTimer(Protocol):
    """Times a block on the device itself (e.g. a pair of CUDA events).

    `start()` is called after the pre-sample sync, `stop()` after the last call of
    the block and returns the elapsed device time in seconds (it syncs as needed).
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> float: ...


def _no_sync() -> None:
    return None


def estimate_overhead_s(clock: Clock, sync: Callable[[], None], repeats: int = 200) -> float:
    """Cost the timer adds to one sample: a sync plus a clock read, at both edges.

    Measured as the median gap between consecutive (sync, clock) pairs; an injected
    fake clock that does not advance by itself yields exactly 0.
    """
    reads = []
    for _ in range(repeats):
        sync()
        reads.append(clock())
    gaps = sorted(b - a for a, b in itertools.pairwise(reads))
    # Two edges per sample: one (sync, read) before and one after.
    return 2.0 * quantile(gaps, 0.5) if gaps else 0.0


def measure(
    fn: Callable[[], object],
    *,
    sync: Callable[[], None] | None = None,
    device_timer: DeviceTimer | None = None,
    warmup: int = defaults.WARMUP,
    min_run_time_s: float = defaults.MIN_RUN_TIME_S,
    max_time_s: float = defaults.BUDGET_S,
    min_samples: int = 6,
    max_samples: int = 1000,
    target_rel_ci: float = defaults.TARGET_REL_CI,
    min_sample_time_s: float = 1e-3,
    block_size: int | None = None,
    clock: Clock = time.perf_counter,
    disable_gc: bool = True,
) -> Measurement:
    """Time `fn` until its median is known to `target_rel_ci` or the budget is spent.

    1. The first call is timed alone (`first_call_s`: JIT, context creation,
       autotuning) and `warmup` more calls follow; none of them is a sample.
    2. The block size (calls per sample) is calibrated so that the timer's own
       overhead is under 0.1% of a sample and a sample lasts >= `min_sample_time_s`.
    3. Each sample is bracketed by `sync()` (the framework adapter's device
       synchronisation); with `device_timer`, the device's own clock times it.
    4. Sampling stops, once there are `min_samples` samples and `min_run_time_s`
       has passed, when the 95% CI of the median is narrower than
       `target_rel_ci` x median, or when `max_time_s` or `max_samples` is reached.

    The defaults of `warmup`, `min_run_time_s`, `max_time_s` and `target_rel_ci` are a case's
    (`dlperf.timing.defaults`), so a bare `measure(fn)` times as a study's case does.

    Python's garbage collector is paused while timing (as `timeit` and
    torch.utils.benchmark do) unless `disable_gc=False`, and restored after.
    """
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError("need 1 <= min_samples <= max_samples")
    if target_rel_ci <= 0:
        raise ValueError("target_rel_ci must be positive")
    sync = sync or _no_sync
    gc_was_enabled = gc.isenabled()
    if disable_gc:
        gc.collect()
        gc.disable()
    try:
        return _measure(fn, sync, device_timer, warmup, min_run_time_s, max_time_s, min_samples, max_samples,
                        target_rel_ci, min_sample_time_s, block_size, clock)
    finally:
        if gc_was_enabled:
            gc.enable()


def _measure(
    fn: Callable[[], object],
    sync: Callable[[], None],
    device_timer: DeviceTimer | None,
    warmup: int,
    min_run_time_s: float,
    max_time_s: float,
    min_samples: int,
    max_samples: int,
    target_rel_ci: float,
    min_sample_time_s: float,
    block_size: int | None,
    clock: Clock,
) -> Measurement:
    sync()
    t0 = clock()
    fn()
    sync()
    first_call_s = clock() - t0

    t0 = clock()
    for _ in range(warmup):
        fn()
    sync()
    warmup_s = clock() - t0
    warmup_iters = warmup

    overhead_s = estimate_overhead_s(clock, sync)
    if block_size is None:
        block_size, calib_iters, calib_s = _calibrate_block(fn, sync, clock, overhead_s, min_sample_time_s)
        warmup_iters += calib_iters
        warmup_s += calib_s
    elif block_size < 1:
        raise ValueError("block_size must be >= 1")

    times: list[float] = []
    iters: list[int] = []
    per_call: list[float] = []
    start = clock()
    stop_reason = ""
    while True:
        sync()
        if device_timer is not None:
            device_timer.start()
            for _ in range(block_size):
                fn()
            elapsed = device_timer.stop()
            sync()
        else:
            a = clock()
            for _ in range(block_size):
                fn()
            sync()
            elapsed = clock() - a
        times.append(elapsed)
        iters.append(block_size)
        _insort(per_call, elapsed / block_size)
        n = len(times)
        spent = clock() - start
        if n >= max_samples:
            stop_reason = "max_samples"
            break
        if n < min_samples or spent < min_run_time_s:
            continue
        ci = median_ci(per_call)
        median = quantile(per_call, 0.5)
        if ci is not None and median > 0 and (ci[1] - ci[0]) <= target_rel_ci * median:
            stop_reason = "ci"
            break
        if spent >= max_time_s:
            stop_reason = "budget"
            break

    return Measurement(
        sample_times_s=tuple(times),
        sample_iters=tuple(iters),
        first_call_s=first_call_s,
        warmup_iters=warmup_iters,
        warmup_s=warmup_s,
        block_size=block_size,
        timer_overhead_s=overhead_s,
        stop_reason=stop_reason,
        timer=device_timer.name if device_timer is not None else "perf_counter",
    )


def _calibrate_block(
    fn: Callable[[], object],
    sync: Callable[[], None],
    clock: Clock,
    overhead_s: float,
    min_sample_time_s: float,
    max_block: int = 1 << 24,
) -> tuple[int, int, float]:
    """Smallest block whose sample lasts >= max(min_sample_time_s, overhead / 0.1%).

    Doubles a trial block until it lasts at least that long (or a tenth of it,
    then scales), so slow calls cost one trial and fast calls a few. Returns
    (block size, calls spent, seconds spent); those calls count as warm-up.
    """
    target_s = max(min_sample_time_s, overhead_s / MAX_OVERHEAD_FRACTION)
    if target_s <= 0:
        return 1, 0, 0.0
    n = 1
    spent_iters = 0
    spent_s = 0.0
    while True:
        sync()
        a = clock()
        for _ in range(n):
            fn()
        sync()
        elapsed = clock() - a
        spent_iters += n
        spent_s += elapsed
        if elapsed >= target_s or n >= max_block:
            break
        if elapsed >= target_s / 10:
            break
        n *= 2
    per_call = elapsed / n if elapsed > 0 else 0.0
    if per_call <= 0:
        return min(n, max_block), spent_iters, spent_s
    # (1 - 1e-6): clock arithmetic rounding must not add a whole extra call.
    block = max(1, math.ceil(target_s / per_call * (1 - 1e-6)))
    return min(block, max_block), spent_iters, spent_s


def _insort(values: list[float], x: float) -> None:
    import bisect

    bisect.insort(values, x)
