"""CaseResult: statistics and rates shown anywhere are recomputed from the stored raw samples."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dlperf.core.result import CaseResult, Metrics, derive_rates
from dlperf.timing import Measurement


def _row(measurement: Measurement, metrics: dict, device: str = "cpu") -> dict:
    now = datetime.now(UTC)
    return {"id": 1, "run_id": "r", "case_key": "k", "repetition": 0, "workload": "ops", "framework": "numpy",
            "device": device, "params": {"op": "add"}, "status": "ok", "reason": None,
            "measurement": measurement.to_dict(), "metrics": metrics, "env_id": 1, "wall_s": 1.0,
            "started_at": now, "finished_at": now}


def test_statistics_and_rates_come_from_the_samples_not_from_disk() -> None:
    m = Measurement(sample_times_s=(1e-3, 2e-3, 3e-3, 4e-3, 5e-3), sample_iters=(1, 1, 1, 1, 1))
    stored = derive_rates(m.summary(), 4, 8e6, 2e6)
    tampered = dict(stored, median_s=99.0, iqr_rel=0.5, flops_per_s=1.0, samples_per_s=1.0, steps_per_epoch=10,
                    time_per_epoch_s_derived=0.0)
    r = CaseResult.from_row(_row(m, tampered))
    assert r.m.median_s == pytest.approx(3e-3)
    assert r.m.iqr_rel == pytest.approx(m.iqr_rel)
    assert r.m.flops_per_s == pytest.approx(8e6 / 3e-3)
    assert r.m.samples_per_s == pytest.approx(4 / 3e-3)
    assert r.m.time_per_epoch_s_derived == pytest.approx(10 * 3e-3)
    assert set(r.as_row()["metrics"]) == set(tampered)  # the stored keys, no more


def test_extra_metrics_are_kept_and_readable_by_name() -> None:
    m = Metrics.model_validate({"median_s": 1.0, "oom_recheck": {"cap_mb": 2400}, "custom_j": 3.0})
    assert m.get("custom_j") == 3.0 and m.get("missing", "-") == "-"
    assert m.oom_recheck == {"cap_mb": 2400}


def test_peak_memory_is_the_allocator_on_a_gpu_and_rss_on_a_cpu() -> None:
    m = Measurement(sample_times_s=(1e-3,), sample_iters=(1,))
    metrics = {"peak_rss_bytes": 100, "peak_device_mem_bytes": 50}
    assert CaseResult.from_row(_row(m, metrics)).peak_memory() == (100, "worker peak RSS")
    assert CaseResult.from_row(_row(m, metrics, device="cuda:0")).peak_memory() == (50, "device allocator peak")
    assert CaseResult.from_row(_row(m, {}, device="cpu")).peak_memory() == (None, "not measured")


def test_a_torchrun_case_is_judged_again_with_the_threads_its_ranks_kept_busy() -> None:
    """A ddp/collectives case stores `busy_threads` (ranks x threads each) beside the worker's own `threads`: the
    re-judgement on load must use the ranks' count, as the worker did (runner/driven.py), not the worker's."""
    from dlperf.core.validity import OTHERS_OVERSUBSCRIBED_CORES

    m = Measurement(sample_times_s=tuple(1e-3 * (1 + i / 100) for i in range(20)), sample_iters=(1,) * 20)
    others = OTHERS_OVERSUBSCRIBED_CORES + 0.05  # enough to oversubscribe 2 cores with 2 busy threads, not with 1
    activity = {"cores": 2, "windows": {"during": {"others_cores": others, "wall_s": 1.0}}}
    metrics = derive_rates(m.summary(), 1, None, None) | {"validity": "valid", "activity": activity, "threads": 1}
    assert CaseResult.from_row(_row(m, metrics)).m.validity == "valid"
    assert CaseResult.from_row(_row(m, metrics | {"busy_threads": 2})).m.validity == "contended"
