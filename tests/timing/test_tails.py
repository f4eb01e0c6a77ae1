"""Tails: the order-statistic CI of any quantile, Measurement's tail summary, and the timer's per-call mode."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dlperf.timing import Measurement, measure
from dlperf.timing.defaults import PER_CALL_MIN_SAMPLES
from dlperf.timing.stats import median_ci_ranks, quantile_ci, quantile_ci_ranks, tail_summary


def _binom_cdf(k: int, n: int, q: float) -> float:
    """P(B <= k) for B ~ Binomial(n, q), exactly (fractions would be slow; floats are enough to 1e-12 here)."""
    return math.fsum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1)) if k >= 0 else 0.0


@pytest.mark.parametrize("n", range(1, 301))
def test_quantile_ci_at_the_median_is_the_median_ci(n):
    assert quantile_ci_ranks(n, 0.5) == median_ci_ranks(n)


@pytest.mark.parametrize(("q", "smallest_n"), [(0.5, 6), (0.9, 36), (0.99, 368), (0.1, 36)])
def test_smallest_n_with_a_95_percent_interval(q, smallest_n):
    # Each side may miss with at most 2.5%: the extreme order statistic must do it, P(B = n) = q^n <= 0.025.
    assert quantile_ci_ranks(smallest_n - 1, q) is None
    assert quantile_ci_ranks(smallest_n, q) is not None
    assert quantile_ci(list(range(smallest_n - 1)), q) is None


@pytest.mark.parametrize(("n", "q"), [(36, 0.9), (100, 0.9), (100, 0.5), (400, 0.99), (1000, 0.99), (57, 0.25)])
def test_ranks_are_equal_tailed_and_as_narrow_as_the_coverage_allows(n, q):
    j, k = quantile_ci_ranks(n, q)
    below = _binom_cdf(j - 1, n, q)  # P(B < j): the lower end misses
    above = 1 - _binom_cdf(k - 1, n, q)  # P(B >= k): the upper end misses
    assert below <= 0.025 + 1e-12 and above <= 0.025 + 1e-12
    assert 1 - below - above >= 0.95
    # one rank further in on either side would miss more than 2.5% on that side
    assert _binom_cdf(j, n, q) > 0.025
    assert 1 - _binom_cdf(k - 2, n, q) > 0.025


@pytest.mark.parametrize(("q", "n"), [(0.5, 30), (0.9, 60), (0.9, 200), (0.99, 400)])
def test_interval_covers_the_true_quantile_in_95_percent_of_seeded_samples(q, n):
    """Exponential samples, whose q-quantile is -ln(1 - q): the interval must cover it at least 95% of the time
    (the simulated rate, 4000 trials, is allowed 2.2 standard errors below 95%)."""
    rng = np.random.default_rng(16)
    trials = 4000
    truth = -math.log(1 - q)
    samples = np.sort(rng.exponential(size=(trials, n)), axis=1)
    j, k = quantile_ci_ranks(n, q)
    covered = np.mean((samples[:, j - 1] <= truth) & (truth <= samples[:, k - 1]))
    assert covered >= 0.95 - 2.2 * math.sqrt(0.95 * 0.05 / trials), covered
    assert covered <= 0.995  # and not a vacuous interval


def test_tail_summary_matches_numpy_percentiles():
    rng = random.Random(7)
    values = [rng.lognormvariate(-6, 0.5) for _ in range(500)]
    t = tail_summary(values, "x_")
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert t[f"x_{name}_s"] == pytest.approx(float(np.percentile(values, q)), rel=1e-12)
        lo, hi = t[f"x_{name}_ci95_low_s"], t[f"x_{name}_ci95_high_s"]
        assert lo <= t[f"x_{name}_s"] <= hi
    assert t["x_max_s"] == max(values) and t["x_mean_s"] == pytest.approx(float(np.mean(values)), rel=1e-12)
    small = tail_summary(values[:20])
    assert small["p50_ci95_low_s"] is not None and small["p90_ci95_low_s"] is None and small["p99_s"] is not None
    assert all(v is None for v in tail_summary([]).values())


def test_measurement_tails_only_for_single_calls():
    rng = random.Random(3)
    times = tuple(rng.uniform(1e-3, 2e-3) for _ in range(120))
    m = Measurement(sample_times_s=times, sample_iters=(1,) * 120, per_call=True)
    s = m.summary()
    assert s["per_call"] is True
    assert s["p90_s"] == pytest.approx(float(np.percentile(times, 90)), rel=1e-12)
    assert s["p90_ci95_low_s"] <= s["p90_s"] <= s["p90_ci95_high_s"]
    assert s["p99_ci95_low_s"] is None and s["p99_s"] is not None  # 120 calls are too few for p99's 95%
    assert s["p50_s"] == s["median_s"]
    blocks = Measurement(sample_times_s=times, sample_iters=(2,) * 120)
    assert all(blocks.summary()[k] is None for k in ("p50_s", "p90_s", "p99_ci95_high_s"))
    again = Measurement.from_dict(m.to_dict())
    assert again.per_call and again.summary() == s
    assert "per_call" not in blocks.to_dict()  # stored only where set: old rows keep their shape


def test_per_call_mode_times_each_call_alone_with_a_sync_at_each_edge(fake_clock):
    events: list[str] = []
    rng = random.Random(11)
    durations = [0.5] + [1e-5 * rng.lognormvariate(0, 0.3) for _ in range(2000)]  # 10 us calls: a block would be >1
    it = iter(durations)

    def fn():
        events.append("call")
        fake_clock.advance(next(it))

    def sync():
        events.append("sync")

    m = measure(fn, sync=sync, clock=fake_clock, warmup=2, per_call=True, min_run_time_s=0, target_rel_ci=0.5)
    assert m.per_call and m.block_size == 1 and set(m.sample_iters) == {1}
    assert m.warmup_iters == 2  # no calibration calls
    assert m.n_samples == PER_CALL_MIN_SAMPLES and m.stop_reason == "ci"  # the CI was met long before: the floor
    assert list(m.times_s) == pytest.approx(durations[3:3 + m.n_samples], rel=1e-9)
    assert events[-3 * m.n_samples:] == ["sync", "call", "sync"] * m.n_samples
    assert m.first_call_s == 0.5


def test_per_call_mode_keeps_the_usual_stop_rules_and_fixed_counts(fake_clock):
    fn = lambda: fake_clock.advance(1e-3)
    m = measure(fn, clock=fake_clock, per_call=True, min_samples=400, max_samples=400, min_run_time_s=0)
    assert m.n_samples == 400 and m.stop_reason == "max_samples"  # a study's `steps`: exactly that many
    assert m.summary()["p99_ci95_low_s"] == pytest.approx(1e-3)
    rng = random.Random(5)
    noisy = lambda: fake_clock.advance(1e-3 * rng.lognormvariate(0, 0.5))
    budget = measure(noisy, clock=fake_clock, per_call=True, max_time_s=0.05, min_run_time_s=0, target_rel_ci=1e-9,
                     max_samples=100000)
    # the budget wins over the 100-call floor: ~50 calls of ~1 ms in 0.05 s, not 100 (a slow case must not run far
    # past its budget into its time-out); the tails then say how many calls they rest on
    assert 6 <= budget.n_samples < PER_CALL_MIN_SAMPLES and budget.stop_reason == "budget"
    assert budget.total_time_s == pytest.approx(0.05, rel=0.2)
    slow = measure(lambda: fake_clock.advance(0.02), clock=fake_clock, per_call=True, max_time_s=0.01,
                   min_run_time_s=0, warmup=0)
    assert slow.n_samples == 6 and slow.stop_reason == "budget"  # never fewer than a median interval needs
    assert slow.summary()["p90_ci95_low_s"] is None
    with pytest.raises(ValueError, match="block_size must be 1"):
        measure(fn, clock=fake_clock, per_call=True, block_size=4)
