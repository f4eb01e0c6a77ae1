"""`Measurement`: raw per-sample times plus the iterations behind each; statistics on demand."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Required, TypedDict

from dlperf.timing.shape import shape_flags
from dlperf.timing.stats import median_ci, quantile, tail_keys, tail_summary
from dlperf.units import format_time

#: IQR / median above this raises the noise flag (same threshold as torch.utils.benchmark).
NOISE_IQR_REL = 0.10


class MeasurementRecord(TypedDict, total=False):
    """A measurement as stored (`Measurement.to_dict`, read back by `from_dict`): the raw samples and how they
    were taken. `to_dict` writes every key but the last two (those only where set); an older row may lack any
    key but the samples, and reads as the field's default."""

    sample_times_s: Required[list[float]]
    sample_iters: Required[list[int]]
    first_call_s: float | None
    warmup_iters: int
    warmup_s: float
    block_size: int
    timer_overhead_s: float
    stop_reason: str
    timer: str
    sample_cpu_s: list[float] | None
    per_call: bool


class Summary(TypedDict):
    """A measurement's statistics (`Measurement.summary`), per call in seconds, in the order they are stored;
    the tails (p50/p90/p99 with their 95% CIs) are None unless each sample is one call."""

    n_samples: int
    total_iters: int
    median_s: float
    mean_s: float
    stdev_s: float | None
    min_s: float
    max_s: float
    q1_s: float
    q3_s: float
    iqr_s: float
    iqr_rel: float
    ci95_low_s: float | None
    ci95_high_s: float | None
    ci95_rel_width: float | None
    noisy: bool
    cpu_util: float | None
    first_call_s: float | None
    block_size: int
    timer_overhead_s: float
    stop_reason: str
    per_call: bool
    p50_s: float | None
    p50_ci95_low_s: float | None
    p50_ci95_high_s: float | None
    p90_s: float | None
    p90_ci95_low_s: float | None
    p90_ci95_high_s: float | None
    p99_s: float | None
    p99_ci95_low_s: float | None
    p99_ci95_high_s: float | None


@dataclass(frozen=True)
class Measurement:
    """What the timer saw: one entry per sample, never aggregated away.

    `sample_times_s[i]` is the wall (or device-event) time of a block of
    `sample_iters[i]` calls; every statistic is per call (time / iterations).
    `first_call_s` and the warm-up are kept apart and excluded from the samples.
    """

    sample_times_s: tuple[float, ...]
    sample_iters: tuple[int, ...]
    first_call_s: float | None = None
    warmup_iters: int = 0
    warmup_s: float = 0.0
    block_size: int = 1
    timer_overhead_s: float = 0.0
    stop_reason: str = ""
    timer: str = "perf_counter"
    #: The process's CPU time (all its threads) during each sample, seconds; None where not recorded.
    #: Against the wall time it shows a descheduled process: wall >> CPU / threads.
    sample_cpu_s: tuple[float, ...] | None = None
    #: Timed in per-call mode (`measure(per_call=True)`): one call per sample, its tails the point.
    per_call: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if len(self.sample_times_s) != len(self.sample_iters):
            raise ValueError("sample_times_s and sample_iters must have the same length")
        if self.sample_cpu_s is not None and len(self.sample_cpu_s) != len(self.sample_times_s):
            raise ValueError("sample_cpu_s and sample_times_s must have the same length")
        if any(i <= 0 for i in self.sample_iters):
            raise ValueError("every sample must cover at least one iteration")

    # -- per-call times -------------------------------------------------
    @cached_property
    def times_s(self) -> tuple[float, ...]:
        """Per-call time of each sample, in sample order."""
        return tuple(t / i for t, i in zip(self.sample_times_s, self.sample_iters, strict=True))

    @cached_property
    def _sorted(self) -> tuple[float, ...]:
        return tuple(sorted(self.times_s))

    @property
    def n_samples(self) -> int:
        return len(self.sample_times_s)

    @property
    def total_iters(self) -> int:
        return sum(self.sample_iters)

    @property
    def total_time_s(self) -> float:
        """Time spent inside timed samples (warm-up and first call excluded)."""
        return math.fsum(self.sample_times_s)

    def _need(self) -> None:
        if not self.sample_times_s:
            raise ValueError("measurement has no samples")

    @property
    def median_s(self) -> float:
        self._need()
        return quantile(self._sorted, 0.5)

    @property
    def mean_s(self) -> float:
        """Iteration-weighted mean: total time over total calls."""
        self._need()
        return self.total_time_s / self.total_iters

    @property
    def stdev_s(self) -> float | None:
        """Sample standard deviation of per-call times (None for a single sample)."""
        return statistics.stdev(self.times_s) if self.n_samples > 1 else None

    @property
    def min_s(self) -> float:
        self._need()
        return self._sorted[0]

    @property
    def max_s(self) -> float:
        self._need()
        return self._sorted[-1]

    @property
    def q1_s(self) -> float:
        self._need()
        return quantile(self._sorted, 0.25)

    @property
    def q3_s(self) -> float:
        self._need()
        return quantile(self._sorted, 0.75)

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @property
    def iqr_rel(self) -> float:
        """IQR / median, the spread users compare against the 10% noise threshold."""
        return self.iqr_s / self.median_s if self.median_s > 0 else math.inf

    @property
    def ci95_s(self) -> tuple[float, float] | None:
        """Distribution-free 95% CI of the median; None with fewer than 6 samples."""
        return median_ci(self._sorted, 0.95) if self.sample_times_s else None

    @property
    def ci95_rel_width(self) -> float | None:
        """(CI high - CI low) / median, the quantity the adaptive stop compares to its target."""
        ci = self.ci95_s
        if ci is None or self.median_s <= 0:
            return None
        return (ci[1] - ci[0]) / self.median_s

    @property
    def cpu_util(self) -> float | None:
        """The process's CPU seconds per wall second during a sample, median over samples.

        About the thread count for a busy multi-threaded op and ~1 for one busy thread; far below
        that, the process was descheduled or waiting (contention, I/O, a device). With a device
        timer it is CPU seconds per device second. None where no CPU time was recorded (or every
        sample lasted 0 s, as under a fake clock that does not move).
        """
        if self.sample_cpu_s is None:
            return None
        ratios = sorted(c / t for c, t in zip(self.sample_cpu_s, self.sample_times_s, strict=True) if t > 0)
        return quantile(ratios, 0.5) if ratios else None

    @property
    def tails(self) -> dict[str, float | None]:
        """p50/p90/p99 of single calls, each with its 95% CI (`stats.tail_summary`; max and mean are
        `max_s`/`mean_s`). Every value None unless each sample is one call: a percentile of block averages
        is not a percentile of calls (blocks average the tail away)."""
        keys = tail_keys()[:-2]
        if not self.sample_times_s or any(i != 1 for i in self.sample_iters):
            return dict.fromkeys(keys)
        tails = tail_summary(self.times_s)
        return {k: tails[k] for k in keys}

    @property
    def shape_flags(self) -> list[str]:
        """Why the median does not summarise these samples (bimodal, drifting), [] if it does (`timing.shape`)."""
        return shape_flags(self.times_s)

    @property
    def noisy(self) -> bool:
        """True when IQR/median exceeds 10%: the median is not to be trusted to a few %."""
        return self.n_samples > 1 and self.iqr_rel > NOISE_IQR_REL

    # -- (de)serialisation ---------------------------------------------
    def summary(self) -> Summary:
        """Statistics as a flat dict (all times per call, in seconds)."""
        ci, tails = self.ci95_s, self.tails
        return {
            "n_samples": self.n_samples,
            "total_iters": self.total_iters,
            "median_s": self.median_s,
            "mean_s": self.mean_s,
            "stdev_s": self.stdev_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "q1_s": self.q1_s,
            "q3_s": self.q3_s,
            "iqr_s": self.iqr_s,
            "iqr_rel": self.iqr_rel,
            "ci95_low_s": ci[0] if ci else None,
            "ci95_high_s": ci[1] if ci else None,
            "ci95_rel_width": self.ci95_rel_width,
            "noisy": self.noisy,
            "cpu_util": self.cpu_util,
            "first_call_s": self.first_call_s,
            "block_size": self.block_size,
            "timer_overhead_s": self.timer_overhead_s,
            "stop_reason": self.stop_reason,
            "per_call": self.per_call,
            "p50_s": tails["p50_s"],
            "p50_ci95_low_s": tails["p50_ci95_low_s"],
            "p50_ci95_high_s": tails["p50_ci95_high_s"],
            "p90_s": tails["p90_s"],
            "p90_ci95_low_s": tails["p90_ci95_low_s"],
            "p90_ci95_high_s": tails["p90_ci95_high_s"],
            "p99_s": tails["p99_s"],
            "p99_ci95_low_s": tails["p99_ci95_low_s"],
            "p99_ci95_high_s": tails["p99_ci95_high_s"],
        }

    def to_dict(self) -> MeasurementRecord:
        """Raw data only; statistics are recomputed on load, never trusted from disk."""
        out: MeasurementRecord = {
            "sample_times_s": list(self.sample_times_s),
            "sample_iters": list(self.sample_iters),
            "first_call_s": self.first_call_s,
            "warmup_iters": self.warmup_iters,
            "warmup_s": self.warmup_s,
            "block_size": self.block_size,
            "timer_overhead_s": self.timer_overhead_s,
            "stop_reason": self.stop_reason,
            "timer": self.timer,
        }
        if self.sample_cpu_s is not None:
            out["sample_cpu_s"] = list(self.sample_cpu_s)
        if self.per_call:
            out["per_call"] = True
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        """A measurement from its stored dict (`MeasurementRecord`; a row of any version, hence read key by key)."""
        return cls(
            sample_times_s=tuple(float(x) for x in data["sample_times_s"]),
            sample_iters=tuple(int(x) for x in data["sample_iters"]),
            first_call_s=data.get("first_call_s"),
            warmup_iters=int(data.get("warmup_iters", 0)),
            warmup_s=float(data.get("warmup_s", 0.0)),
            block_size=int(data.get("block_size", 1)),
            timer_overhead_s=float(data.get("timer_overhead_s", 0.0)),
            stop_reason=str(data.get("stop_reason", "")),
            timer=str(data.get("timer", "perf_counter")),
            sample_cpu_s=(tuple(float(x) for x in data["sample_cpu_s"])
                          if data.get("sample_cpu_s") is not None else None),
            per_call=bool(data.get("per_call", False)),
        )

    def __repr__(self) -> str:
        if not self.sample_times_s:
            return "Measurement(no samples)"
        flag = "  NOISY" if self.noisy else ""
        return (
            f"Measurement(median={format_time(self.median_s)}, "
            f"IQR={format_time(self.iqr_s)} ({self.iqr_rel:.1%}), "
            f"n={self.n_samples} x {self.block_size} iters{flag})"
        )

