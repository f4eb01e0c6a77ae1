"""analysis.effect: the Hodges-Lehmann shift and its distribution-free CI (exact ranks from the Mann-Whitney null
distribution, normal approximation above), the same order statistics without an n x m array, Welch's t on
per-process medians, and which of the two `estimate` uses."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import ttest_ind

from dlperf.analysis import effect
from dlperf.analysis.effect import critical_rank, estimate, hodges_lehmann, welch


@pytest.mark.parametrize(("n", "m", "c"), [(3, 3, 0), (4, 4, 1), (5, 5, 3), (10, 10, 24), (8, 12, 23)])
def test_exact_critical_ranks_match_the_mann_whitney_table(n, m, c):
    # Two-sided 5% critical values of U (U <= c - 1 rejects): 4x4: 0, 5x5: 2, 10x10: 23, 8x12: 22.
    assert critical_rank(n, m) == c


def test_exact_null_distribution_by_enumeration():
    """Every placement of 5 x's among 12 values is equally likely under no difference: count U for each."""
    n, m = 5, 7
    us = []
    for xs in itertools.combinations(range(n + m), n):
        us.append(sum(1 for x in xs for y in set(range(n + m)) - set(xs) if x < y))
    counts = np.bincount(us, minlength=n * m + 1)
    assert effect._u_null_cdf(n, m) == pytest.approx(np.cumsum(counts) / counts.sum(), abs=1e-12)


def test_normal_approximation_agrees_with_the_exact_ranks_where_they_meet(monkeypatch):
    exact = [critical_rank(n, m) for n, m in ((20, 20), (30, 29), (25, 35))]
    monkeypatch.setattr(effect, "EXACT_MAX_N", 0)
    approx = [critical_rank(n, m) for n, m in ((20, 20), (30, 29), (25, 35))]
    assert all(abs(a - e) <= 1 for a, e in zip(approx, exact, strict=True)), (approx, exact)


def test_hodges_lehmann_by_hand():
    # differences y - x: 9-1=8, 9-2=7, 10-1=9, 10-2=8 -> median 8; 2x2 is too few for a 95% interval
    assert hodges_lehmann([1.0, 2.0], [9.0, 10.0]) == (8.0, None, None)
    # 4x4: c = 1, so the interval is [smallest, largest] of the 16 differences
    shift, lo, hi = hodges_lehmann([0.0, 1.0, 2.0, 3.0], [10.0, 11.0, 12.0, 14.0])
    assert (shift, lo, hi) == (10.0, 7.0, 14.0)


def test_interval_covers_the_true_shift_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    for n, m in ((12, 9), (80, 70)):  # exact ranks, then the normal approximation
        hits = 0
        for _ in range(600):
            x, y = rng.exponential(1.0, n), rng.exponential(1.0, m) + 0.5
            _, lo, hi = hodges_lehmann(x, y)
            hits += lo <= 0.5 <= hi
        assert 0.92 <= hits / 600 <= 0.98, (n, m, hits / 600)


def test_large_samples_give_the_same_order_statistics_without_the_pair_array(monkeypatch):
    rng = np.random.default_rng(3)
    x, y = rng.normal(0, 1, 900), rng.normal(0.1, 1, 700)
    built = hodges_lehmann(x, y)
    monkeypatch.setattr(effect, "MATERIALIZE_MAX_PAIRS", 0)
    bisected = hodges_lehmann(x, y)
    assert bisected == pytest.approx(built, abs=1e-11)


def test_welch_matches_scipy():
    x, y = [0.0, 0.1, -0.05, 0.02], [0.3, 0.25, 0.4]
    d, lo, hi, p = welch(x, y)
    assert d == pytest.approx(np.mean(y) - np.mean(x))
    assert p == pytest.approx(ttest_ind(y, x, equal_var=False).pvalue)
    assert lo < d < hi and d - lo == pytest.approx(hi - d)


def test_estimate_pools_samples_of_one_process_a_side_and_compares_process_medians_from_two():
    rng = np.random.default_rng(11)

    def process(scale):
        return list(scale * rng.lognormal(0, 0.02, 200))

    one = estimate([process(1.0)], [process(1.2)])
    assert one.method == "samples" and one.ratio == pytest.approx(1.2, rel=0.01) and one.p_value < 1e-6
    two = estimate([process(1.0), process(1.0)], [process(1.2), process(1.2)])
    assert two.method == "processes" and two.ratio == pytest.approx(1.2, rel=0.01) and two.p_value < 0.01
    assert two.ci_low > 1.1  # processes that agree give a narrow interval even at 2 degrees of freedom
    # Three processes a side whose levels differ by ~10% from process to process: pooling would call a
    # 1.00 ratio precise; per-process medians carry the spread between processes into the interval.
    levels_a, levels_b = [1.0, 1.1, 0.92], [1.08, 0.95, 1.01]
    per_process = estimate([process(s) for s in levels_a], [process(s) for s in levels_b])
    pooled = estimate([sum((process(s) for s in levels_a), [])], [sum((process(s) for s in levels_b), [])])
    assert per_process.method == "processes" and pooled.method == "samples"
    assert per_process.ci_high - per_process.ci_low > 3 * (pooled.ci_high - pooled.ci_low)
    gm = math.exp(np.mean(np.log(levels_b)) - np.mean(np.log(levels_a)))
    assert per_process.ratio == pytest.approx(gm, rel=0.01)


def test_estimate_with_identical_values_says_nothing_differs():
    e = estimate([[1e-3] * 10], [[1e-3] * 10])
    assert e.ratio == 1.0 and e.p_value == 1.0 and e.ci_low == e.ci_high == 1.0


def test_an_aa_pair_of_three_against_two_processes_is_not_called_slower():
    """The A/A false alarm of issue 28 (AMD VM, numpy sigmoid at 0.5 MB): the same study twice, one process of
    the second run left out as contended, and the two left happened to be a few percent slower than the first
    run's three. Pooling their samples called it "slower" at p = 1e-43; the per-process medians with their
    pooled spread (Student's t, 3 degrees of freedom) cannot tell, and the interval crosses the 5% threshold."""
    rng = np.random.default_rng(3)

    def process(level):
        return list(level * rng.lognormal(0, 0.03, 400))

    a = [process(lv) for lv in (1.0, 1.03, 0.98)]
    b = [process(lv) for lv in (1.07, 1.09)]
    pooled = estimate([sum(a, [])], [sum(b, [])])
    assert pooled.ci_low > 1.05 and pooled.p_value < 1e-20  # what the samples alone claimed
    e = estimate(a, b)
    assert e.method == "processes"
    assert e.ci_low < 1.05 < e.ci_high and e.p_value > 1e-4
    assert e.ratio == pytest.approx(math.exp(np.mean(np.log([1.07, 1.09])) - np.mean(np.log([1.0, 1.03, 0.98]))),
                                    rel=0.01)
