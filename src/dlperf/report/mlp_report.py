"""The `mlp` study's report (study 000): time per iteration and per run, energy and EDP, GPU/CPU speedup.

Time per run = median time per iteration x iterations (derived, as the table says);
with repetitions, each figure is the median over repetitions. Energy is shown
only where a meter measured it; otherwise the cell says "not measured".
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from dlperf.analysis.picking import Trail
from dlperf.core.result import CaseResult
from dlperf.report.sections import Heading, Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.studies import paper
from dlperf.timing import format_energy, format_time
from dlperf.units import format_iqr, format_number

SIZE_ORDER = {"small": 0, "medium": 1, "large": 2, "custom": 3}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _dtype(r: CaseResult) -> str:
    """The case's dtype (the schema's default where a stored case predates the field)."""
    from dlperf.workloads.mlp import MlpParams

    return MlpParams.model_validate(r.params).dtype


Key = tuple[str, str, str, str, str]  # framework, variant, size, dtype, device


def _groups(results: list[CaseResult]) -> dict[Key, list[CaseResult]]:
    """The ok mlp results per (framework, variant, size, dtype, device); repetitions together."""
    groups: dict[Key, list[CaseResult]] = defaultdict(list)
    for r in results:
        if r.ok and r.workload == "mlp":
            p = r.params
            groups[(r.framework, p["variant"], p["size"], _dtype(r), r.device)].append(r)
    return groups


def _per_run(rs: list[CaseResult]) -> tuple[float | None, float | None, float | None]:
    """(time per iteration, energy per run in J or None, mean power in W or None): medians over repetitions."""
    iters = rs[0].params["iterations"]
    t_iter = _median([r.m.median_s for r in rs])
    energies = [r.m.energy for r in rs if (r.m.energy or {}).get("measured")]
    if not energies:
        return t_iter, None, None
    e_call = _median([e["energy_per_call_j"] for e in energies])
    return t_iter, (e_call * iters if e_call is not None else None), _median([e["mean_power_w"] for e in energies])


def mlp_rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """(header, rows) per framework/variant/size/dtype/device, and (header, rows) of the GPU/CPU speedup.

    dtype is part of the key: float32 and float64 cases are separate rows, never repetitions of one."""
    groups = _groups(results)
    header = ["framework", "variant", "size", "dtype", "device", "reps", "time/iter", "IQR", "time/run (derived)",
              "GFLOP/s", "energy/run", "EDP/run (J s)", "mean power"]
    rows, per_iter = [], {}
    for key in sorted(groups, key=lambda k: (k[0], k[1], SIZE_ORDER.get(k[2], 9), k[3], k[4])):
        rs = groups[key]
        iters = rs[0].params["iterations"]
        t_iter, e_run, power = _per_run(rs)
        per_iter[key] = t_iter
        gflops = _median([r.m.flops_per_s for r in rs])
        if e_run is not None and t_iter is not None:
            t_run = t_iter * iters
            energy_cells = [format_energy(e_run), f"{e_run * t_run:.4g}", format_number(power, ".1f") + " W"]
        else:
            energy_cells = ["not measured", "-", "-"]
        iqr = _median([r.m.iqr_rel for r in rs])  # spread of per-iteration times (median over reps)
        rows.append([*key, str(len(rs)), format_time(t_iter), format_iqr(iqr),
                     format_time(t_iter * iters if t_iter is not None else None), format_number(gflops, scale=1e9),
                     *energy_cells])
    sp_header = ["framework", "variant", "size", "dtype", "CPU time/iter", "GPU time/iter", "GPU speedup"]
    sp_rows = []
    for (fw, variant, size, dtype, device), t_cpu in per_iter.items():
        if device != "cpu" or t_cpu is None:
            continue
        gpu = [(d, t) for (f, v, s, dt, d), t in per_iter.items()
               if (f, v, s, dt) == (fw, variant, size, dtype) and d != "cpu" and t]
        for d, t_gpu in gpu:
            sp_rows.append([fw, variant, size, dtype, format_time(t_cpu), f"{format_time(t_gpu)} ({d})",
                            f"{t_cpu / t_gpu:.1f}x"])
    return header, rows, sp_header, sp_rows


#: The study's programs in its order (Alg1, Alg2, Alg3) and the framework and dtype it ran (PyTorch, its default).
PAPER_VARIANTS = ("tensors", "autograd", "custom_function")
PAPER_FRAMEWORK, PAPER_DTYPE = "torch", "float32"
PAPER_EDP = "lower on the GPU, no number (Fig. 3)"
PAPER_PICTURES = ("study 000 prints time, energy (J) and EDP per program, size and device only as bar charts "
                  "(Figures 2 and 3, a Jetson TX2, 500 iterations, mean of 10 runs): none of their figures is "
                  "transcribed. Its text gives one number, the GPU's 87.6x speedup for the tensors program at the "
                  "large size, and says the EDP is lower on the GPU for every program. This run's time, energy and "
                  "EDP per run are in the study 000 layout above")


def sizes_table(results: list[CaseResult]) -> Table:
    """Study 000's Table 1 (N, D_in, H, D_out per size) beside the dimensions this run's cases used."""
    from dlperf.workloads.mlp import MlpParams

    ref = paper.load("study000_sizes")
    used: dict[str, tuple[int, ...]] = {}
    for r in results:
        if r.workload == "mlp":
            d = MlpParams.model_validate(r.params).dims()
            used.setdefault(r.params["size"], (d.n, d.d_in, d.h, d.d_out))
    rows = []
    for row in ref.rows:
        dims = used.get(row["size"])
        mine = [f"{d:,}" for d in dims] if dims else ["missing here: size not in this run", "", "", ""]
        rows.append([row["size"], *(f"{int(row[k]):,}" for k in ("n", "d_in", "h", "d_out")), *mine])
    header = ["size", "paper N", "paper D_in", "paper H", "paper D_out", "this run N", "this run D_in",
              "this run H", "this run D_out"]
    return Table("study 000 Table 1 (input sizes) as published, beside this run's", header, rows,
                 heading="### Table 1: input sizes, paper and this run",
                 intro=f"Paper: {ref.citation}")


def _edp_ratio(cpu: list[CaseResult], gpu: list[CaseResult]) -> str:
    """This run's EDP per run on the GPU over the CPU's, or why it is missing."""
    (t_c, e_c, _), (t_g, e_g, _) = _per_run(cpu), _per_run(gpu)
    missing = [d for d, e in (("CPU", e_c), ("GPU", e_g)) if e is None]
    if missing or not (t_c and t_g and e_c):
        return f"missing here: energy not measured on the {' and '.join(missing) or 'CPU'}"
    return f"{(e_g * t_g) / (e_c * t_c):.3g} ({'lower' if e_g * t_g < e_c * t_c else 'higher'} on the GPU)"


def paper_rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]]]:
    """Per program and size: the paper's GPU speedup and EDP statement beside this run's (PyTorch, float32)."""
    ref = paper.load("study000_quoted")
    # the selection the 000 claims judge on: ok cases, invalid ones left out, medians over repetitions
    every = _groups(results)
    groups = {k: good for k, rs in every.items() if (good := Trail().take(rs))}
    has_gpu = any(k[4] != "cpu" for k in groups)
    header = ["program", "size", "paper: GPU speedup", "this run: GPU speedup", "paper: EDP GPU vs CPU",
              "this run: EDP GPU / CPU"]
    rows = []
    for variant in PAPER_VARIANTS:
        for size in ("small", "medium", "large"):
            quoted = ref.where(quantity="gpu_speedup", variant=variant, size=size)
            mine = {k[4]: rs for k, rs in groups.items() if k[:4] == (PAPER_FRAMEWORK, variant, size, PAPER_DTYPE)}
            cpu, gpus = mine.get("cpu"), [d for d in mine if d != "cpu"]
            dead = sorted(d for (fw, v, sz, dt, d) in every.keys() - groups.keys()
                          if (fw, v, sz, dt) == (PAPER_FRAMEWORK, variant, size, PAPER_DTYPE))
            if not (cpu and gpus) and dead:
                speed = edp = f"missing here: only invalid measurements on {', '.join(dead)}"
            elif not cpu:
                speed = edp = f"missing here: no {PAPER_FRAMEWORK} {PAPER_DTYPE} CPU case of this program and size"
            elif not gpus:
                speed = edp = ("missing here: no GPU case of it in this run" if has_gpu
                               else "missing here: this run has no GPU case")
            else:
                t_cpu, t_gpu = _per_run(cpu)[0], _per_run(mine[gpus[0]])[0]
                speed = f"{t_cpu / t_gpu:.1f}x ({gpus[0]})" if t_cpu and t_gpu else "missing here: no time"
                edp = _edp_ratio(cpu, mine[gpus[0]])
            rows.append([variant, size, f"{quoted[0]['value']}x" if quoted else "not printed (Fig. 2, a chart)",
                         speed, PAPER_EDP, edp])
    return header, rows


def paper_sections(results: list[CaseResult]) -> list[Section]:
    """Study 000 as published beside this run: Table 1's sizes, the printed speedup, the EDP statement."""
    ref = paper.load("study000_quoted")
    header, rows = paper_rows(results)
    return [Heading("## Study 000 as published, beside this run",
                    "The paper's figures come from its text (each cell says where); they were measured on a Jetson "
                    "TX2, not here."),
            sizes_table(results),
            Table("study 000 as published (Jetson TX2, PyTorch) beside this run (torch, float32): GPU speedup "
                  "and EDP", header, rows, heading="### GPU speedup and EDP, paper and this run",
                  intro=f"Paper: {ref.citation}", text_cols=(-3, -2, -1)),
            Note(PAPER_PICTURES, markdown=PAPER_PICTURES[0].upper() + PAPER_PICTURES[1:] + ".")]


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
    return out + paper_sections(data.results)
