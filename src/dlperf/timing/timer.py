"""`measure()`: warm-up apart, calibrated blocks, device sync at every edge, adaptive stop."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from dlperf.timing.config import TimerConfig
from dlperf.timing.measurement import Measurement
from dlperf.timing.stats import median_ci, quantile

Clock = Callable[[], float]

#: Per-call mode: the budget may stop sampling before the tail floor, but not before this many calls.
PER_CALL_BUDGET_FLOOR = 6
#: Single calls that each fill a sample on their own, after which the block is 1 without more trials.
SLOW_CALL_TRIALS = 2
#: After this many samples the block is checked once more against the target: the calls may have got faster
#: since calibration (seen: a JAX op at 770 us per call while calibrating, 70 us when sampled) ...
RECHECK_SAMPLES = 3
#: ... and set again at most this many times.
MAX_RECALIBRATIONS = 2

#: The block size is chosen so timer overhead stays below this fraction of a sample.
MAX_OVERHEAD_FRACTION = 1e-3
#: Calibration trusts no single trial: the block comes from the fastest of at least this many trials at
#: the final trial size (warm-up calls count as trials of one call).
CALIBRATION_TRIALS = 3


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
    config: TimerConfig | None = None,
    *,
    sync: Callable[[], None] | None = None,
    device_timer: DeviceTimer | None = None,
    clock: Clock = time.perf_counter,
    cpu_clock: Clock = time.process_time,
    disable_gc: bool = True,
    **changes: Any,
) -> Measurement:
    """Time `fn` as `config` says (default: a study case's `TimerConfig`; keyword `changes` are TimerConfig fields
    that replace its values, e.g. `measure(fn, warmup=0)`), until its median is known to `target_rel_ci` or the
    budget is spent.

    1. The first call is timed alone (`first_call_s`: JIT, context creation,
       autotuning) and `warmup` more calls follow; none of them is a sample.
    2. The block size (calls per sample) is calibrated so that the timer's own
       overhead is under 0.1% of a sample and a sample lasts >= `min_sample_time_s`,
       from the fastest of several trials, so one stall cannot shrink it (`_calibrate_block`).
    3. Each sample is bracketed by `sync()` (the framework adapter's device
       synchronisation); with `device_timer`, the device's own clock times it.
       `cpu_clock` (default `time.process_time`: CPU time of all the process's threads)
       is read just outside the timed window at both edges, giving `sample_cpu_s`: a
       sample whose CPU time is far below wall time x threads was descheduled
       (`Measurement.cpu_util`). It costs one extra read per edge (~0.5 us each for
       process_time on Linux, about 1 us per sample), outside the timed window, so it
       lengthens the run by under 0.1% of a >= 1 ms sample and does not bias the times.
    4. Sampling stops, once there are `min_samples` samples and `min_run_time_s`
       has passed, when the 95% CI of the median is narrower than
       `target_rel_ci` x median, or when `max_time_s` or `max_samples` is reached.

    Per-call mode (`per_call=True`, for tails: generation's latencies): every sample is one call, timed
    alone with a sync and a clock read at each edge (block 1, no calibration, no re-check); `min_samples`
    defaults to `defaults.PER_CALL_MIN_SAMPLES` (100) instead of 6, and the stop rules are the same, except
    that the budget (`max_time_s`) stops calls too slow to reach that floor in it, once there are
    `PER_CALL_BUDGET_FLOOR` (6, the fewest with a median interval): a slow case ends with fewer calls and tails
    marked "n too small" instead of running far past its budget into its time-out. The Measurement's `tails`
    then give p50/p90/p99 with their intervals.

    Python's garbage collector is paused while timing (as `timeit` and
    torch.utils.benchmark do) unless `disable_gc=False`, and restored after.
    """
    cfg = dataclasses.replace(config or TimerConfig(), **changes) if changes else (config or TimerConfig())
    gc_was_enabled = gc.isenabled()
    if disable_gc:
        gc.collect()
        gc.disable()
    try:
        return _measure(fn, sync or _no_sync, device_timer, cfg, clock, cpu_clock)
    finally:
        if gc_was_enabled:
            gc.enable()


def _measure(fn: Callable[[], object], sync: Callable[[], None], device_timer: DeviceTimer | None,
             cfg: TimerConfig, clock: Clock, cpu_clock: Clock) -> Measurement:
    warmup, min_run_time_s, max_time_s = cfg.warmup, cfg.min_run_time_s, cfg.max_time_s
    min_samples, max_samples, target_rel_ci = cfg.samples_floor, cfg.max_samples, cfg.target_rel_ci
    min_sample_time_s, block_size, per_call = cfg.min_sample_time_s, cfg.block, cfg.per_call
    sync()
    t0 = clock()
    fn()
    sync()
    first_call_s = clock() - t0

    # Each warm-up call is timed alone: it is also a calibration trial of one call.
    warmup_trials: list[tuple[int, float]] = []
    for _ in range(warmup):
        a = clock()
        fn()
        sync()
        warmup_trials.append((1, clock() - a))
    warmup_s = math.fsum(t for _, t in warmup_trials)
    warmup_iters = warmup

    overhead_s = estimate_overhead_s(clock, sync)
    target_s = max(min_sample_time_s, overhead_s / MAX_OVERHEAD_FRACTION)
    recalibrations = 0 if block_size is None else MAX_RECALIBRATIONS  # a block the caller fixed stays
    if block_size is None:
        block_size, calib_iters, calib_s = _calibrate_block(fn, sync, clock, overhead_s, min_sample_time_s,
                                                            warmup_trials)
        warmup_iters += calib_iters
        warmup_s += calib_s

    times: list[float] = []
    cpus: list[float] = []
    iters: list[int] = []
    ranked: list[float] = []
    start = clock()
    stop_reason = ""
    while True:
        sync()
        c = cpu_clock()  # outside the timed window: its cost is not in `elapsed`
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
        cpus.append(cpu_clock() - c)
        times.append(elapsed)
        iters.append(block_size)
        _insort(ranked, elapsed / block_size)
        n = len(times)
        if n == RECHECK_SAMPLES and recalibrations < MAX_RECALIBRATIONS:
            sample_s = quantile(ranked, 0.5) * block_size
            if 0 < sample_s < target_s / 2:
                # The calls got faster after calibration (caches, a JIT's dispatch settling): these samples
                # are too short for the overhead target. They become warm-up; the block is set again.
                recalibrations += 1
                warmup_iters += sum(iters)
                warmup_s += math.fsum(times)
                block_size = max(1, math.ceil(target_s / quantile(ranked, 0.5) * (1 - 1e-6)))
                times, cpus, iters, ranked = [], [], [], []
                start = clock()
                continue
        spent = clock() - start
        if n >= max_samples:
            stop_reason = "max_samples"
            break
        if per_call and n >= PER_CALL_BUDGET_FLOOR and spent >= max_time_s and n < min_samples:
            stop_reason = "budget"  # slow calls: the budget wins over the tail floor (the tails say n too small)
            break
        if n < min_samples or spent < min_run_time_s:
            continue
        ci = median_ci(ranked)
        median = quantile(ranked, 0.5)
        if ci is not None and median > 0 and (ci[1] - ci[0]) <= target_rel_ci * median:
            stop_reason = "ci"
            break
        if spent >= max_time_s:
            stop_reason = "budget"
            break

    return Measurement(
        sample_times_s=tuple(times),
        sample_iters=tuple(iters),
        sample_cpu_s=tuple(cpus),
        first_call_s=first_call_s,
        warmup_iters=warmup_iters,
        warmup_s=warmup_s,
        block_size=block_size,
        timer_overhead_s=overhead_s,
        stop_reason=stop_reason,
        timer=device_timer.name if device_timer is not None else "perf_counter",
        per_call=per_call,
    )


def _calibrate_block(
    fn: Callable[[], object],
    sync: Callable[[], None],
    clock: Clock,
    overhead_s: float,
    min_sample_time_s: float,
    trials: list[tuple[int, float]] | None = None,
    max_block: int = 1 << 24,
) -> tuple[int, int, float]:
    """Smallest block whose sample lasts >= max(min_sample_time_s, overhead / 0.1%), from several trials.

    A trial block of n calls is doubled until, at the fastest per-call time seen so far, it would last
    at least a tenth of the target (long enough to read against the clock); then trials at that n are
    repeated until there are `CALIBRATION_TRIALS` of them, and the block is target / fastest per-call
    time. Why the fastest: a stall (a descheduled thread, an interrupt, a page fault) can only make a
    trial slower, never faster, so the minimum over trials is the estimate that one bad moment cannot
    spoil. A single trial let one stall end the doubling early with an inflated per-call time, giving
    block = 1 and 0.1 ms samples; now a stalled trial is outvoted, and if the repeats show it was a
    stall (they are too short to read) doubling resumes. `trials` are (calls, seconds) already timed
    (the warm-up calls, one call each); a call that fills a sample on its own twice gives block 1 at once,
    so a slow step is not run again (with warm-up 0, two single-call trials are run to tell it from a stall).
    Returns (block size, calls spent, seconds spent); those calls count as warm-up.
    """
    target_s = max(min_sample_time_s, overhead_s / MAX_OVERHEAD_FRACTION)
    if target_s <= 0:
        return 1, 0, 0.0
    trials = list(trials or [])
    spent_iters = 0
    spent_s = 0.0

    def trial(n: int) -> None:
        nonlocal spent_iters, spent_s
        sync()
        a = clock()
        for _ in range(n):
            fn()
        sync()
        elapsed = clock() - a
        trials.append((n, elapsed))
        spent_iters += n
        spent_s += elapsed

    n = 1
    while sum(1 for k, _ in trials if k == 1) < SLOW_CALL_TRIALS and all(t >= target_s for _, t in trials):
        trial(1)  # a single call that fills a sample: once more, for a stall is not a slow call
    if all(t / k >= target_s for k, t in trials):
        return 1, spent_iters, spent_s  # every call fills a sample: block 1, no more repeats of a slow call
    while True:
        fastest = min(t / k for k, t in trials)
        if fastest * n < target_s / 10 and n < max_block:
            n = min(2 * n, max_block)
            trial(n)
            continue
        if n >= max_block or sum(1 for k, _ in trials if k == n) >= CALIBRATION_TRIALS:
            break
        trial(n)
    if fastest <= 0:
        return n, spent_iters, spent_s
    # (1 - 1e-6): clock arithmetic rounding must not add a whole extra call.
    block = max(1, math.ceil(target_s / fastest * (1 - 1e-6)))
    return min(block, max_block), spent_iters, spent_s


def _insort(values: list[float], x: float) -> None:
    import bisect

    bisect.insort(values, x)
