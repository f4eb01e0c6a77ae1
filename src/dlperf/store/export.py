"""Export a run's results as CSV (one row per case, flat) or JSON (everything, raw samples included)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from dlperf.core.environment import Environment
from dlperf.core.payloads import LoadgenMetric, LoadgenSummary
from dlperf.core.result import CaseResult
from dlperf.core.status import SHORTENED
from dlperf.store.rows import RunRow

#: Metric columns of the CSV, in order (all per call; rates from the median).
CSV_METRICS = ("median_s", "iqr_s", "iqr_rel", "mean_s", "stdev_s", "min_s", "max_s", "ci95_low_s", "ci95_high_s",
               "n_samples", "block_size", "noisy", "first_call_s", "samples_per_s", "flops_per_s", "bytes_per_s",
               "peak_rss_bytes", "peak_device_mem_bytes")

#: Trust columns: validity, its reason, the process's CPU per wall second, others' cores while it ran.
VALIDITY_COLUMNS = ("validity", "validity_reason", "cpu_util")
#: LoadGen's columns, in an export with served cases (`metrics["loadgen"]`): its verdict, the scenario's MLPerf
#: metric (name, value, unit) and whether the run was shortened below MLPerf's rules ("no": MLPerf's own).
LOADGEN_COLUMNS = ("loadgen_validity", "loadgen_metric_name", "loadgen_metric", "loadgen_metric_unit", "shortened")
#: The columns every row has; a case parameter of the same name is written as `param.<name>` (a served case's
#: `workload` parameter, the workload it serves, beside its own workload `serve`).
FIXED = ("run_id", "case_key", "repetition", "workload", "framework", "device", "status", "reason", *CSV_METRICS,
         *VALIDITY_COLUMNS, "env_id", *LOADGEN_COLUMNS)


def to_json(run: RunRow, env: Environment, results: list[CaseResult]) -> str:
    """Everything: the run, its environment, and each result with its raw samples and recomputed statistics."""
    rows = [r.as_row() for r in results]
    return json.dumps({"run": run.to_dict(), "environment": env, "results": rows}, indent=2, default=str) + "\n"


def to_csv(results: list[CaseResult]) -> str:
    """One flat row per case: its parameters, status and the CSV_METRICS (recomputed from the samples)."""
    param_keys: list[str] = []
    for r in results:
        for k in r.params:
            if k not in param_keys:
                param_keys.append(k)
    served = any(r.workload == "serve" for r in results)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["run_id", "case_key", "repetition", "workload", "framework", "device",
                     *(f"param.{k}" if k in FIXED else k for k in param_keys),
                     "status", "reason", *CSV_METRICS, *VALIDITY_COLUMNS, "env_id",
                     *(LOADGEN_COLUMNS if served else ())])
    for r in results:
        m = r.m
        writer.writerow([r.run_id, r.case_key, r.repetition, r.workload, r.framework, r.device,
                         *(r.params.get(k, "") for k in param_keys), r.status, r.reason or "",
                         *("" if m.get(c) is None else m.get(c) for c in CSV_METRICS),
                         *("" if m.get(c) is None else m.get(c) for c in VALIDITY_COLUMNS), r.env_id,
                         *(loadgen_cells(m.loadgen_summary()) if served else ())])
    return buf.getvalue()


def loadgen_cells(lg: LoadgenSummary | None) -> list[Any]:
    """The LOADGEN_COLUMNS of one row ("" where the case stored no LoadGen result)."""
    if lg is None:
        return [""] * len(LOADGEN_COLUMNS)
    metric = lg.metric or LoadgenMetric(name=None, value=None, unit=None)
    if lg.shortened is None:
        short = ""
    else:
        short = f"{SHORTENED} ({'; '.join(lg.shortened)})" if lg.shortened else "no"
    return [lg.validity or "", metric.name or "", "" if metric.value is None else metric.value, metric.unit or "",
            short]
