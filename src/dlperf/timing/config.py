"""`TimerConfig`: what the timer is asked to do (warm-up, stop rules, block, per-call mode), as one value.

The timer (`timer.measure`) takes one of these instead of ten loose arguments, the worker builds one from a case's
settings (`runner.worker`), and a test or a benchmark states only what it changes (`TimerConfig(warmup=0)` or
`measure(fn, warmup=0)`, which is the same). Checked on construction, so a bad combination fails where it is made.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.timing import defaults


@dataclass(frozen=True)
class TimerConfig:
    """The timer's settings; the defaults are a study case's (`timing.defaults`)."""

    #: Untimed calls after the first call (which is timed alone as `first_call_s`), before sampling.
    warmup: int = defaults.WARMUP
    #: Sampling goes on at least this long, whatever the interval says.
    min_run_time_s: float = defaults.MIN_RUN_TIME_S
    #: The budget: sampling stops here even where the interval is still wide.
    max_time_s: float = defaults.BUDGET_S
    #: The fewest samples before the stop rules apply (None: 6, or `PER_CALL_MIN_SAMPLES` per call).
    min_samples: int | None = None
    max_samples: int = 1000
    #: Stop once the 95% interval of the median is narrower than this fraction of it.
    target_rel_ci: float = defaults.TARGET_REL_CI
    #: A sample (a block of calls) lasts at least this long.
    min_sample_time_s: float = 1e-3
    #: Calls per sample; None: calibrated against the timer's overhead.
    block_size: int | None = None
    #: Every sample one call timed alone (for latency tails); the block is 1.
    per_call: bool = False

    def __post_init__(self) -> None:
        if self.per_call and self.block_size not in (None, 1):
            raise ValueError("per_call times single calls: block_size must be 1 (or left out)")
        if self.block_size is not None and self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.target_rel_ci <= 0:
            raise ValueError("target_rel_ci must be positive")
        if self.samples_floor < 1 or self.max_samples < self.samples_floor:
            raise ValueError("need 1 <= min_samples <= max_samples")

    @property
    def samples_floor(self) -> int:
        """`min_samples`, or its default for the mode."""
        if self.min_samples is not None:
            return self.min_samples
        return min(defaults.PER_CALL_MIN_SAMPLES, self.max_samples) if self.per_call else 6

    @property
    def block(self) -> int | None:
        """The block the caller fixed (1 per call), or None to calibrate."""
        return 1 if self.per_call else self.block_size


__all__ = ["TimerConfig"]
