"""Order statistics and Measurement, against values computed by hand."""

from __future__ import annotations

import math

import pytest

from dlperf.timing import Measurement
from dlperf.timing.stats import median_ci, median_ci_ranks, quantile


def test_quantile_is_type7_linear_interpolation():
    xs = [1.0, 2.0, 3.0, 4.0]
    assert quantile(xs, 0.5) == 2.5
    assert quantile(xs, 0.25) == 1.75  # pos = 0.75 -> 1 + 0.75 * 1
    assert quantile(xs, 0.75) == 3.25
    assert quantile(xs, 0.0) == 1.0 and quantile(xs, 1.0) == 4.0


@pytest.mark.parametrize(
    ("n", "ranks"),
    [(5, None), (6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (100, (40, 61))],
)
def test_median_ci_ranks_match_binomial_tables(n, ranks):
    # Published order-statistic ranks for a 95% CI of the median (e.g. Conover, Table A3).
    assert median_ci_ranks(n) == ranks


def test_median_ci_normal_approximation_is_close_to_exact_at_the_switch():
    j_exact, _ = median_ci_ranks(300)
    j_approx, _ = median_ci_ranks(301)
    assert abs(j_exact - j_approx) <= 1


def test_median_ci_coverage_is_at_least_95_percent():
    for n in (6, 7, 13, 50, 200):
        j, k = median_ci_ranks(n)
        coverage = sum(math.comb(n, i) for i in range(j, k)) / 2**n
        assert coverage >= 0.95
        # and one rank narrower would fall below 95%
        narrower = sum(math.comb(n, i) for i in range(j + 1, k - 1)) / 2**n
        assert narrower < 0.95


def test_measurement_statistics_exact():
    # Ten samples of 2 iterations each; per-call times 1..10 us (shuffled).
    per_call = [3, 1, 4, 10, 5, 9, 2, 6, 8, 7]
    m = Measurement(sample_times_s=tuple(2 * t * 1e-6 for t in per_call), sample_iters=(2,) * 10)
    assert m.median_s == pytest.approx(5.5e-6)
    assert m.q1_s == pytest.approx(3.25e-6)
    assert m.q3_s == pytest.approx(7.75e-6)
    assert m.iqr_s == pytest.approx(4.5e-6)
    assert m.mean_s == pytest.approx(5.5e-6)
    assert m.min_s == pytest.approx(1e-6) and m.max_s == pytest.approx(10e-6)
    assert m.stdev_s == pytest.approx(math.sqrt(sum((t - 5.5) ** 2 for t in per_call) / 9) * 1e-6)
    assert m.ci95_s == pytest.approx((2e-6, 9e-6))  # ranks (2, 9) for n = 10
    assert m.noisy  # IQR/median = 82%


def test_mean_is_weighted_by_iterations():
    m = Measurement(sample_times_s=(1.0, 3.0), sample_iters=(1, 3))
    assert m.times_s == (1.0, 1.0)
    assert m.mean_s == 1.0


def test_noise_flag_threshold():
    quiet = Measurement(sample_times_s=(1.0, 1.01, 0.99, 1.0, 1.02, 0.98), sample_iters=(1,) * 6)
    assert not quiet.noisy
    assert quiet.iqr_rel < 0.10


def test_round_trip_keeps_raw_samples():
    m = Measurement(sample_times_s=(1e-3, 2e-3), sample_iters=(4, 8), first_call_s=0.5, block_size=4)
    again = Measurement.from_dict(m.to_dict())
    assert again == m
    assert again.summary()["median_s"] == m.median_s


def test_median_ci_none_for_small_samples():
    assert median_ci([1.0, 2.0, 3.0]) is None
    m = Measurement(sample_times_s=(1.0,) * 3, sample_iters=(1,) * 3)
    assert m.ci95_s is None and m.ci95_rel_width is None


def test_invalid_measurements_rejected():
    with pytest.raises(ValueError):
        Measurement(sample_times_s=(1.0,), sample_iters=(1, 2))
    with pytest.raises(ValueError):
        Measurement(sample_times_s=(1.0,), sample_iters=(0,))
