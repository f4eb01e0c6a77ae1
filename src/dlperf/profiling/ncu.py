"""Hardware counters with Nsight Compute (`ncu`), named after the nvprof metrics study 002 used.

nvprof (gone since Volta-era tools) -> the Nsight Compute metrics that replaced it:
- flop_count_sp = fadd + fmul + 2 x ffma thread instructions
  (smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma}_pred_on.sum);
- flop_sp_efficiency = smsp__sass_thread_inst_executed_ops_fadd_fmul_ffma_pred_on
  .avg.pct_of_peak_sustained_elapsed;
- stall_inst_fetch = warps stalled with no instruction, per issued instruction
  (smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio);
- stall_exec_dependency = short-scoreboard plus fixed-latency ("wait") stalls per issue
  (smsp__average_warps_issue_stalled_{short_scoreboard,wait}_per_issue_active.ratio).
Also gpu__time_duration.sum and dram__bytes.sum, so the analytic bytes can be
compared with what DRAM really moved.

Only kernels inside the NVTX range `dlperf_counters` are profiled: the worker
opens it around a fixed number of calls, after a warm-up call outside it, so
autotuning and set-up kernels are left out. Counts are per call (totals / calls).
"""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

NVTX_RANGE = "dlperf_counters"
CALLS = 3

FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
SP_EFF = "smsp__sass_thread_inst_executed_ops_fadd_fmul_ffma_pred_on.avg.pct_of_peak_sustained_elapsed"
STALL_FETCH = "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio"
STALL_SHORT = "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"
STALL_WAIT = "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
DURATION = "gpu__time_duration.sum"
DRAM = "dram__bytes.sum"
METRICS = (FADD, FMUL, FFMA, SP_EFF, STALL_FETCH, STALL_SHORT, STALL_WAIT, DURATION, DRAM)


class CountersUnavailable(RuntimeError):
    """ncu is absent or cannot profile here."""


def find_ncu() -> str | None:
    """ncu's path: $DLPERF_NCU (a path, or 'none' to disable), else PATH, else the CUDA default."""
    import os

    override = os.environ.get("DLPERF_NCU")
    if override:
        return None if override.lower() == "none" else (override if Path(override).exists() else None)
    for candidate in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def ncu_command(ncu: str, worker_argv: list[str], csv_path: Path) -> list[str]:
    """The ncu invocation around a worker: raw CSV of METRICS for kernels in the NVTX range."""
    return [ncu, "--csv", "--page", "raw", "--metrics", ",".join(METRICS), "--nvtx", "--nvtx-include",
            f"{NVTX_RANGE}/", "--target-processes", "all", "--log-file", str(csv_path), *worker_argv]


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> list[dict[str, Any]]:
    """ncu --csv --page raw: one row per kernel launch; a units row may follow the header;
    ncu's own log lines (==PROF== ...) may precede it."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        raise CountersUnavailable("ncu saw no kernel inside the NVTX range: the step launched none (a plain "
                                  "device-to-device copy runs on the copy engine, which ncu does not profile)")
    header = rows[start]
    kernels = []
    for row in rows[start + 1:]:
        if len(row) != len(header):
            continue
        rec = dict(zip(header, row, strict=True))
        if not rec.get("Kernel Name") or not rec.get("ID", "x").strip().isdigit():
            continue  # the units row
        kernels.append({"kernel": rec["Kernel Name"], **{m: _number(rec.get(m, "")) for m in METRICS}})
    return kernels


def summarise(kernels: Iterable[dict[str, Any]], calls: int, analytic_flops: float | None,
              analytic_bytes: float | None) -> dict[str, Any]:
    """Per-call counts in the study's nvprof names, and their agreement with the cost model."""
    ks = list(kernels)
    if not ks:
        raise CountersUnavailable("no kernels were profiled")

    def total(metric: str) -> float | None:
        values = [k[metric] for k in ks if k[metric] is not None]
        return sum(values) if values else None

    def time_weighted(metric: str) -> float | None:
        pairs = [(k[metric], k[DURATION] or 0.0) for k in ks if k[metric] is not None]
        weight = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / weight if pairs and weight > 0 else None

    fadd, fmul, ffma = total(FADD), total(FMUL), total(FFMA)
    flops = None if fadd is None or fmul is None or ffma is None else (fadd + fmul + 2 * ffma) / calls
    dram = total(DRAM)
    dram_per_call = dram / calls if dram is not None else None
    short, wait = time_weighted(STALL_SHORT), time_weighted(STALL_WAIT)
    return {
        "source": "ncu",
        "calls": calls,
        "kernels": sorted({k["kernel"] for k in ks}),
        "kernel_launches_per_call": len(ks) / calls,
        "flop_count_sp": flops,
        "flop_sp_efficiency_pct": time_weighted(SP_EFF),
        "stall_inst_fetch": time_weighted(STALL_FETCH),
        "stall_exec_dependency": None if short is None and wait is None else (short or 0.0) + (wait or 0.0),
        "dram_bytes": dram_per_call,
        "kernel_time_s": (total(DURATION) or 0.0) / 1e9 / calls,  # ns -> s
        "flops_counter_over_model": flops / analytic_flops if flops is not None and analytic_flops else None,
        "dram_bytes_over_model": (dram_per_call / analytic_bytes
                                  if dram_per_call is not None and analytic_bytes else None),
    }
