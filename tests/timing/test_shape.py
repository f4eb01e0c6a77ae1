"""timing.shape on seeded synthetic samples: no flag on unimodal noise, flags on two modes and on a trend."""

from __future__ import annotations

import math
import random

import pytest

from dlperf.timing import Measurement, shape_flags
from dlperf.timing.shape import find_bimodal, find_drift, mann_whitney_p

#: Unimodal per-call time generators (seconds), the shapes timings take on a quiet or noisy machine.
UNIMODAL = {
    "lognormal 5%": lambda r: 1e-3 * r.lognormvariate(0, 0.05),
    "lognormal 30%": lambda r: 1e-3 * r.lognormvariate(0, 0.3),
    "gamma": lambda r: 1e-3 * r.gammavariate(2, 1),
    "exponential tail": lambda r: 1e-3 * (1 + r.expovariate(1)),
    "pareto tail": lambda r: 1e-3 * r.paretovariate(2),
    "uniform 1-2 ms": lambda r: 1e-3 * r.uniform(1, 2),
}


@pytest.mark.parametrize("name", sorted(UNIMODAL))
def test_unimodal_noise_raises_no_flag_over_many_seeds(name):
    gen = UNIMODAL[name]
    for n in (50, 200):
        flagged = [seed for seed in range(150) if shape_flags([gen(random.Random(seed)) for _ in range(n)])]
        assert flagged == [], f"{name}, n={n}: flagged for seeds {flagged}"


def test_unimodal_false_positive_rate_is_small_at_the_fewest_samples():
    """At n = 20, the fewest a bimodal verdict is given for, chance splits pass at most ~2% of the time."""
    hits = trials = 0
    for gen in UNIMODAL.values():
        for seed in range(200):
            rng = random.Random(seed)
            hits += find_bimodal([gen(rng) for _ in range(20)]) is not None
            trials += 1
    assert hits / trials <= 0.02


def test_too_few_samples_give_no_verdict():
    assert shape_flags([1e-3] * 5 + [10e-3] * 5) == []
    assert shape_flags([]) == []


@pytest.mark.parametrize("seed", range(20))
def test_two_clusters_are_flagged_with_their_share_and_times(seed):
    """The issue's numpy dot: ~38% of samples near 11.2 ms, the rest near 1.21 ms, interleaved at random."""
    rng = random.Random(seed)
    times = [rng.lognormvariate(math.log(11.2e-3 if rng.random() < 0.38 else 1.21e-3), 0.05) for _ in range(100)]
    flags = shape_flags(times)
    assert len(flags) == 1 and flags[0].startswith("bimodal: ")
    found = find_bimodal(times)
    slow_share = sum(t > 4e-3 for t in times) / len(times)
    slow_is_minority = slow_share <= 0.5
    minority, majority = (11.2e-3, 1.21e-3) if slow_is_minority else (1.21e-3, 11.2e-3)
    assert found.minority_fraction == pytest.approx(min(slow_share, 1 - slow_share))
    assert found.minority_median_s == pytest.approx(minority, rel=0.05)
    assert found.majority_median_s == pytest.approx(majority, rel=0.05)
    assert f"{found.minority_fraction:.0%} of samples near " in flags[0]
    assert ("near 11" in flags[0].split(",")[0]) == slow_is_minority


def test_a_slow_majority_is_reported_as_the_rest():
    rng = random.Random(3)
    times = [rng.lognormvariate(math.log(8e-3 if i % 10 < 7 else 0.2e-3), 0.1) for i in range(60)]
    found = find_bimodal(times)
    assert found is not None and found.minority_fraction == pytest.approx(0.3)
    assert found.minority_median_s == pytest.approx(0.2e-3, rel=0.1)
    assert found.majority_median_s == pytest.approx(8e-3, rel=0.1)


def test_close_or_small_modes_are_not_called_bimodal():
    rng = random.Random(5)
    # two tight modes only 10% apart: a spread, not two regimes
    close = [rng.lognormvariate(math.log(1.1e-3 if rng.random() < 0.5 else 1e-3), 0.005) for _ in range(100)]
    assert find_bimodal(close) is None
    # 3 slow samples in 100: outliers, under the 10% share
    few = [1e-3 * rng.lognormvariate(0, 0.02) for _ in range(97)] + [9e-3] * 3
    assert find_bimodal(few) is None


@pytest.mark.parametrize("seed", range(10))
def test_a_ramp_is_flagged_as_drifting(seed):
    """Calls slow down steadily by 40% over the run, with 5% noise: the last third is ~27% slower."""
    rng = random.Random(seed)
    n = 90
    times = [1e-3 * (1 + 0.4 * i / (n - 1)) * rng.lognormvariate(0, 0.05) for i in range(n)]
    flags = shape_flags(times)
    assert [f for f in flags if f.startswith("drifting: the last third is ")]
    drift = find_drift(times)
    assert 0.2 < drift.change < 0.35 and drift.p_value < 1e-3
    assert "slower than the first" in drift.reason()


def test_a_speed_up_is_drift_too_and_reads_faster():
    rng = random.Random(11)
    times = [1e-3 * (2.0 if i < 30 else 1.0) * rng.lognormvariate(0, 0.03) for i in range(90)]
    drift = find_drift(times)
    assert drift is not None and drift.change == pytest.approx(-0.5, abs=0.03)
    assert "50% faster than the first" in drift.reason()
    # a step is two clusters as well, in order: both reasons are given
    assert len(shape_flags(times)) == 2


def test_shuffled_drift_is_no_drift():
    """The same values as a ramp, in random order: no trend, so no drift flag."""
    rng = random.Random(2)
    times = [1e-3 * (1 + 0.4 * i / 89) for i in range(90)]
    rng.shuffle(times)
    assert find_drift(times) is None


def test_small_drift_is_not_reported():
    rng = random.Random(4)
    times = [1e-3 * (1 + 0.05 * i / 299) * rng.lognormvariate(0, 0.01) for i in range(300)]
    assert find_drift(times) is None  # 5% is real here but under the 10% worth reporting


def test_mann_whitney_matches_known_values():
    # fully separated 8 vs 8: U = 0, z = (32 - 0.5) / sqrt(64 * 17 / 12)
    p = mann_whitney_p(list(range(8)), list(range(8, 16)))
    assert p == pytest.approx(math.erfc(31.5 / math.sqrt(64 * 17 / 12) / math.sqrt(2)), rel=1e-12)
    assert mann_whitney_p([1.0] * 10, [1.0] * 10) == 1.0  # all tied: no evidence
    assert mann_whitney_p([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)


def test_measurement_exposes_the_flags():
    rng = random.Random(9)
    times = [rng.lognormvariate(math.log(11e-3 if i % 3 == 0 else 1.2e-3), 0.05) for i in range(60)]
    m = Measurement(sample_times_s=tuple(t * 4 for t in times), sample_iters=(4,) * 60)
    assert m.shape_flags and m.shape_flags[0].startswith("bimodal: 33% of samples near 11")
    quiet = Measurement(sample_times_s=tuple(1e-3 * rng.lognormvariate(0, 0.02) for _ in range(60)),
                        sample_iters=(1,) * 60)
    assert quiet.shape_flags == []
