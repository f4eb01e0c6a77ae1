"""The `mlp` study's report (study 000): time per iteration and per run, energy and EDP, GPU/CPU speedup.

Time per run = median time per iteration x iterations (derived, as the table says);
with repetitions, each figure is the median over repetitions. Energy is shown
only where a meter measured it; otherwise the cell says "not measured".
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from dlperf.core.result import CaseResult
from dlperf.report.sections import Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.timing import format_energy, format_time
from dlperf.units import format_iqr, format_number

SIZE_ORDER = {"small": 0, "medium": 1, "large": 2, "custom": 3}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _dtype(r: CaseResult) -> str:
    """The case's dtype (the schema's default where a stored case predates the field)."""
    from dlperf.workloads.mlp import MlpParams

    return MlpParams.model_validate(r.params).dtype


def mlp_rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """(header, rows) per framework/variant/size/dtype/device, and (header, rows) of the GPU/CPU speedup.

    dtype is part of the key: float32 and float64 cases are separate rows, never repetitions of one."""
    groups: dict[tuple[str, str, str, str, str], list[CaseResult]] = defaultdict(list)
    for r in results:
        if r.ok and r.workload == "mlp":
            p = r.params
            groups[(r.framework, p["variant"], p["size"], _dtype(r), r.device)].append(r)
    header = ["framework", "variant", "size", "dtype", "device", "reps", "time/iter", "IQR", "time/run (derived)",
              "GFLOP/s", "energy/run", "EDP/run (J s)", "mean power"]
    rows, per_iter = [], {}
    for key in sorted(groups, key=lambda k: (k[0], k[1], SIZE_ORDER.get(k[2], 9), k[3], k[4])):
        rs = groups[key]
        iters = rs[0].params["iterations"]
        t_iter = _median([r.m.median_s for r in rs])
        per_iter[key] = t_iter
        gflops = _median([r.m.flops_per_s for r in rs])
        energies = [r.m.energy for r in rs if (r.m.energy or {}).get("measured")]
        if energies:
            e_run = _median([e["energy_per_call_j"] for e in energies]) * iters
            t_run = t_iter * iters
            power = _median([e["mean_power_w"] for e in energies])
            energy_cells = [format_energy(e_run), f"{e_run * t_run:.4g}", f"{power:.1f} W"]
        else:
            energy_cells = ["not measured", "-", "-"]
        iqr = _median([r.m.iqr_rel for r in rs])  # spread of per-iteration times (median over reps)
        rows.append([*key, str(len(rs)), format_time(t_iter), format_iqr(iqr),
                     format_time(t_iter * iters), format_number(gflops, scale=1e9), *energy_cells])
    sp_header = ["framework", "variant", "size", "dtype", "CPU time/iter", "GPU time/iter", "GPU speedup"]
    sp_rows = []
    for (fw, variant, size, dtype, device), t_cpu in per_iter.items():
        if device != "cpu":
            continue
        gpu = [(d, t) for (f, v, s, dt, d), t in per_iter.items()
               if (f, v, s, dt) == (fw, variant, size, dtype) and d != "cpu"]
        for d, t_gpu in gpu:
            sp_rows.append([fw, variant, size, dtype, format_time(t_cpu), f"{format_time(t_gpu)} ({d})",
                            f"{t_cpu / t_gpu:.1f}x"])
    return header, rows, sp_header, sp_rows


def sections(data: ReportData) -> list[Section]:
    """Study 000's layout: time, energy and EDP per run; the GPU speedup where CUDA cases ran."""
    header, rows, sp_header, sp_rows = mlp_rows(data.results)
    if not rows:
        return []
    out: list[Section] = [Table("study 000 layout: time, energy and EDP per run", header, rows,
                                heading="## Study 000 layout",
                                intro="Time per run = median time per iteration x iterations (derived).")]
    if sp_rows:
        out.append(Table("GPU speedup over the CPU (time per iteration)", sp_header, sp_rows,
                         heading="## GPU speedup"))
    else:
        out += [Heading("## GPU speedup"),
                Note("GPU speedup: no CUDA cases in this run (it needs a GPU)", markdown="No CUDA cases in this run.")]
    return out
