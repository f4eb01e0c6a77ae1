"""The per-case validity decision on synthetic samples and activity records (no clock, no machine)."""

from __future__ import annotations

import random

from dlperf.core.validity import MIN_VALID_SAMPLES, assess
from dlperf.timing.measurement import Measurement


def _m(times: list[float], cpu: list[float] | None = None, overhead_s: float = 0.0) -> Measurement:
    return Measurement(sample_times_s=tuple(times), sample_iters=tuple(1 for _ in times), timer_overhead_s=overhead_s,
                       sample_cpu_s=tuple(cpu) if cpu is not None else None)


def _activity(during: float | None = 0.0, steal: float = 0.0, before: float = 0.0, cores: int = 2) -> dict:
    win = {"others_cores": during, "steal_frac": steal, "wall_s": 1.0, "top_others": [
        {"pid": 42, "name": "hog", "cores": during or 0.0}]}
    return {"cores": cores, "windows": {"before": {"others_cores": before}, "during": win,
                                        "after": {"others_cores": 0.0}}}


def _steady(n: int = 40, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [1e-3 * (1 + 0.01 * rng.random()) for _ in range(n)]


def test_quiet_steady_case_is_valid() -> None:
    times = _steady()
    assert assess(_m(times, [t * 2 for t in times]), _activity(0.0), threads=2, device="cpu") == ("valid", None)


def test_other_processes_on_the_cores_make_it_contended_and_named() -> None:
    times = _steady()
    validity, reason = assess(_m(times), _activity(1.1), threads=2, device="cpu")
    assert validity == "contended"
    assert "1.10 cores" in reason and "hog pid 42" in reason


def test_a_little_load_counts_only_when_the_cores_are_oversubscribed() -> None:
    times = _steady()
    assert assess(_m(times), _activity(0.3), threads=2, device="cpu")[0] == "contended"  # 2 + 0.3 > 2 cores
    assert assess(_m(times), _activity(0.3), threads=1, device="cpu")[0] == "valid"  # 1 + 0.3 <= 2 cores


def test_a_single_threaded_case_is_not_oversubscribed_by_a_little_load() -> None:
    times = _steady()
    one_core = [t * 1.0 for t in times]  # NumPy's ufuncs: one busy thread whatever --threads says
    assert assess(_m(times, one_core), _activity(0.3), threads=2, device="cpu")[0] == "valid"
    two_cores = [t * 2.0 for t in times]
    assert assess(_m(times, two_cores), _activity(0.3), threads=2, device="cpu")[0] == "contended"


def test_steal_makes_it_contended() -> None:
    validity, reason = assess(_m(_steady()), _activity(0.0, steal=0.12), threads=1, device="cpu")
    assert validity == "contended" and "stole 12%" in reason


def test_descheduled_samples_are_slow_and_starved_of_cpu() -> None:
    times = _steady()
    cpu = [t * 2 for t in times]
    for i in range(0, len(cpu), 3):  # a third of the samples: 3x slower, with the same CPU seconds as before
        times[i] *= 3
    validity, reason = assess(_m(times, cpu), _activity(0.0), threads=2, device="cpu")
    assert validity == "contended" and "descheduled" in reason
    # On a GPU the host's CPU time says nothing about the device's work: not judged by it.
    assert assess(_m(times, cpu), _activity(0.0), threads=2, device="cuda")[0] != "contended"


def test_cpu_per_second_varying_alone_is_not_contention() -> None:
    # OpenMP threads spin or sleep between calls: the CPU per second of a quiet op varies with equal times.
    times = _steady()
    cpu = [t * (2.0 if i % 2 else 0.9) for i, t in enumerate(times)]
    assert assess(_m(times, cpu), _activity(0.0), threads=2, device="cpu") == ("valid", None)


def test_too_few_samples_or_large_timer_overhead_are_invalid() -> None:
    assert assess(_m([1e-3] * (MIN_VALID_SAMPLES - 1)), _activity(), threads=1, device="cpu")[0] == "invalid"
    validity, reason = assess(_m(_steady(), overhead_s=5e-5), _activity(), threads=1, device="cpu")
    assert validity == "invalid" and "timer overhead" in reason


def test_wide_spread_is_noisy_and_the_worst_finding_leads() -> None:
    rng = random.Random(3)
    times = [1e-3 * (1 + rng.random()) for _ in range(40)]
    assert assess(_m(times), _activity(0.0), threads=1, device="cpu")[0] == "noisy"
    validity, reason = assess(_m(times), _activity(1.5), threads=1, device="cpu")
    assert validity == "contended" and reason.index("cores") < reason.index("IQR")


def test_shape_findings_make_it_noisy_and_load_around_the_case_is_noted() -> None:
    validity, reason = assess(_m(_steady()), _activity(0.0, before=1.2), threads=1, device="cpu",
                              shape=["bimodal: two clusters"])
    assert validity == "noisy" and "bimodal" in reason and "1.20 cores before" in reason
    validity, reason = assess(_m(_steady()), _activity(0.0, before=1.2), threads=1, device="cpu")
    assert validity == "valid" and "before" in reason


def test_no_activity_record_judges_the_samples_alone() -> None:
    assert assess(_m(_steady()), None, threads=None, device="cpu") == ("valid", None)
    assert assess(None, None, threads=None, device="cpu")[0] == "invalid"


def test_cpu_util_is_the_median_cpu_per_wall_second() -> None:
    times = [1.0, 1.0, 1.0]
    assert _m(times, [2.0, 1.0, 1.8]).cpu_util == 1.8
    assert _m(times).cpu_util is None
