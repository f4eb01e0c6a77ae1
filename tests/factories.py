"""Small builders of the results tests hand to reports, claims, compare and the store: `case(...)` (a
CaseResult as built), `stored(...)` (one as the store reads it back, its statistics recomputed from its
samples), `run_row(...)` (a stored run's row), `report_data(...)` (what a study report is given).

Each has the defaults most tests want, so that a test names only what it is about: an ok numpy case of the
ops workload on the CPU, stored at a fixed time (never the clock, so that two runs of a test build the same
thing). Nothing here touches a store or the disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult, Metrics
from dlperf.report.study import ReportData
from dlperf.store.rows import RunRow

#: When every built case started and finished, unless a test says otherwise.
T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: The default plot folder of `report_data`: under /dev/null, so that a report that draws where the test did not
#: expect it fails at once instead of writing into the working directory.
NO_PLOTS = Path("/dev/null/dlperf-plots")


def samples_of(times_s: Sequence[float]) -> dict[str, Any]:
    """A raw measurement of these per-call times, one call per sample (as the store keeps it)."""
    return {"sample_times_s": list(times_s), "sample_iters": [1] * len(times_s)}


def case(key: str | None = None, *, workload: str = "ops", framework: str = "numpy", device: str = "cpu",
         params: Mapping[str, Any] | None = None, status: str = "ok", reason: str | None = None,
         times_s: Sequence[float] | None = None, measurement: Mapping[str, Any] | None = None,
         metrics: Metrics | Mapping[str, Any] | None = None, run_id: str = "r", rep: int = 0, env_id: int = 1,
         wall_s: float | None = None, at: datetime = T0) -> CaseResult:
    """One stored case. `key`: its case key (default `WORKLOAD/FRAMEWORK/DEVICE/k`); `times_s`: its raw per-call
    times, one call per sample (or the raw `measurement` as stored); `metrics`: a Metrics or its fields, default
    empty metrics for an ok case and none for a failed one."""
    if times_s is not None and measurement is not None:
        raise ValueError("give times_s or measurement, not both")
    if metrics is None:
        built = Metrics() if status == "ok" else None
    else:
        built = metrics if isinstance(metrics, Metrics) else Metrics.model_validate(dict(metrics))
    raw = samples_of(times_s) if times_s else (dict(measurement) if measurement is not None else None)
    return CaseResult(run_id=run_id, case_key=key or f"{workload}/{framework}/{device}/k", repetition=rep,
                      workload=workload, framework=framework, device=device, params=dict(params or {}),
                      status=status, reason=reason, measurement=raw, metrics=built, env_id=env_id, wall_s=wall_s,
                      started_at=at, finished_at=at)


def stored(key: str | None = None, *, workload: str = "ops", framework: str = "numpy", device: str = "cpu",
           params: Mapping[str, Any] | None = None, status: str = "ok", reason: str | None = None,
           measurement: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None,
           run_id: str = "r", rep: int = 0, env_id: int = 1, wall_s: float | None = None,
           at: datetime = T0) -> CaseResult:
    """One case as the store reads it back (`CaseResult.from_row` of its row): the statistics and rates in
    `metrics` recomputed from the raw `measurement`, and its validity judged again, as for a real run. `metrics`
    and `measurement` are the row's dicts as stored (None: the row has none)."""
    return CaseResult.from_row({
        "run_id": run_id, "case_key": key or f"{workload}/{framework}/{device}/k", "repetition": rep,
        "workload": workload, "framework": framework, "device": device, "params": dict(params or {}),
        "status": status, "reason": reason, "measurement": dict(measurement) if measurement is not None else None,
        "metrics": dict(metrics) if metrics is not None else None, "env_id": env_id, "wall_s": wall_s,
        "started_at": at, "finished_at": at})


def run_row(run_id: str = "r", **fields: Any) -> RunRow:
    """A run's row as `Store.run` gives it: a `RunRow` of study `test` (quick), complete, of one case, any field
    overridden by name. The fields a test does not name are neutral: no path, hash or version, no filters."""
    row: dict[str, Any] = {"id": run_id, "study": "test", "variant": "quick", "study_hash": "", "study_path": "",
                           "filters": {}, "settings": {}, "env_id": 1, "status": "complete", "n_cases": 1,
                           "dlperf_version": "", "started_at": T0}
    return RunRow(**(row | fields))


def report_data(results: Sequence[CaseResult] = (), *, run: RunRow | None = None,
                env: Environment | None = None, plot_dir: Path = NO_PLOTS,
                measured_peaks: tuple[dict[str, dict[str, float]], str | None] | None = None) -> ReportData:
    """What a study report is given: these results, `run` (default `run_row()`) and `env` (default none known),
    plots under `plot_dir` (give a tmp path where the report draws)."""
    extra = {"measured_peaks": measured_peaks} if measured_peaks is not None else {}
    return ReportData(run=run if run is not None else run_row(), env=env or {}, results=list(results),
                      plot_dir=plot_dir, **extra)
