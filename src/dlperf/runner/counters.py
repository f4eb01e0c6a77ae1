"""Collect hardware counters for one finished case: rerun its step under ncu in a fresh worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlperf.core.jobs import CaseSpec, CountersJob
from dlperf.core.settings import RunSettings
from dlperf.profiling.ncu import CALLS, CountersUnavailable, find_ncu, ncu_command, parse_csv, summarise
from dlperf.runner.process import run_worker
from dlperf.workloads import get_workload

CSV_NAME = "ncu.csv"


def collect(case: CaseSpec, settings: RunSettings) -> dict[str, Any]:
    """Counters of `case` as a dict for its metrics, or {"error": why} (never invented)."""
    if not case.device.startswith("cuda"):
        return {"error": "hardware counters are collected for CUDA cases only"}
    ncu = find_ncu()
    if ncu is None:
        return {"error": "ncu not found"}
    outcome = run_worker(
        CountersJob(case=case, settings=settings, calls=CALLS),
        timeout_s=settings.timeout_s * 4,  # kernel replay is slow
        threads=settings.threads,
        wrap=lambda argv, tmp: ncu_command(ncu, argv, Path(tmp) / CSV_NAME),
    )
    result = outcome.result
    if result.get("status") != "ok":
        return {"error": f"counters run {result.get('status')}: {result.get('reason')}"}
    text = result.get("_tmpdir_files", {}).get(CSV_NAME)
    if not text:
        return {"error": "ncu wrote no CSV (is the GPU's performance-counter access restricted to admins?)"}
    workload = get_workload(case.workload)
    cost = workload.cost(workload.parse(case.params))
    try:
        return summarise(parse_csv(text), CALLS, cost.flops, cost.bytes_moved)
    except CountersUnavailable as exc:
        return {"error": str(exc)}
