"""The page's own parts of one run, as render.py blocks: the run table (what `show` prints), the validity
and noise flags per case, the environment with the peaks used and their sources. A run whose results came
from several machines (a fleet run) has a `machine` column in its table, as `show` has, and its environment
part lists every machine with each one's environment; a run on one machine has neither."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dlperf.analysis.machines import MachineShare, share_names
from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.hardware.identity import describe_machine
from dlperf.report.html.render import Block, table_block, text_blocks
from dlperf.report.noise import noise_lines
from dlperf.report.run_columns import column_titles, columns
from dlperf.report.tables import (
    FAILED,
    across_columns,
    across_processes,
    energy_reasons,
    environment_lines,
    result_rows,
    stored_text,
    validity_line,
)
from dlperf.store.rows import RunRow
from dlperf.timing.measurement import Measurement
from dlperf.units import format_iqr


def status_class(r: CaseResult) -> str:
    """A row's class: its status, and its validity where it was measured (the stylesheet colours them)."""
    if r.ok:
        return f"st-ok v-{r.m.validity or 'unknown'}"
    return f"st-{r.status}"


def run_table_blocks(run: RunRow, results: list[CaseResult],
                     machines: Sequence[MachineShare] | None = None) -> list[Block]:
    """The run table with every note whole, the validity counts, repetitions across processes, energy;
    `machines`: the run's shares by machine (a machine column where there is more than one)."""
    names = share_names(machines or [])
    cols = columns(names)
    rows = result_rows(results, names)
    out: list[Block] = [table_block(column_titles(cols, results), [[row[c] for c in cols] for row in rows],
                       caption=f"{stored_text(run, results)}; times per call (median, "
                               "IQR/median, samples x calls per sample)", text_cols=(-1,),
                       row_classes=[status_class(r) for r in results])]
    out += text_blocks([validity_line(results), *noise_lines(results)])
    failed = sum(r.status in FAILED for r in results)
    if failed:
        out += text_blocks([f"{failed} failed case{'s' * (failed != 1)}: their reasons are under Validity and "
                            f"noise flags; `dlperf show {run.id} --errors` prints their stored tracebacks"])
    across = across_processes(results, names)
    if across:
        out.append(table_block(list(across_columns(names)), across,
                               heading="### Repetitions in separate worker processes"))
    out += text_blocks([f"energy: {reason}" for reason in energy_reasons(results)])
    if any(r.m.energy_estimate is not None for r in results):
        out += text_blocks(["energy marked 'est.' is an ESTIMATE (TDP x CPU utilisation x time), not a measurement"])
    return out


def findings(r: CaseResult) -> list[str]:
    """Everything that makes a case's figure doubtful, whole: its failure reason, its validity reason, the
    shape of its samples (bimodal, drifting) and the noise flag (IQR/median over 10%)."""
    out: list[str] = []
    if r.reason:
        out.append(r.reason)
    m = r.m
    if r.ok and m.validity_reason:
        out += [part for part in m.validity_reason.split("; ") if part]
    if r.ok and r.measurement and r.measurement.get("sample_times_s"):
        try:
            meas = Measurement.from_dict(r.measurement)
        except (KeyError, TypeError, ValueError):
            meas = None
        if meas is not None:
            out += [f for f in meas.shape_flags if not any(f.split(":")[0] in o for o in out)]
            if meas.noisy and not any("IQR" in o or "noisy" in o for o in out):
                out.append(f"noisy: IQR/median {format_iqr(meas.iqr_rel)} (over 10%)")
    return out


def flag_blocks(results: list[CaseResult]) -> list[Block]:
    """One row per case that failed or whose figure is not clean (not valid, noisy, bimodal, drifting,
    contended), with every finding; a line for how many are clean."""
    rows, classes = [], []
    for r in results:
        found = findings(r)
        clean = r.ok and (r.m.validity in (None, "valid")) and not found
        if clean:
            continue
        rows.append([r.case_key + (f" #{r.repetition}" if r.repetition else ""), r.status,
                     (r.m.validity or "unknown") if r.ok else "-", format_iqr(r.m.iqr_rel) if r.ok else "-",
                     "; ".join(found) or "-"])
        classes.append(status_class(r))
    n_clean = len(results) - len(rows)
    out: list[Block] = [*text_blocks([f"{n_clean} of {len(results)} stored cases are ok and valid with no finding; "
                       f"{len(rows)} are listed below" if rows else
                       f"all {len(results)} stored cases are ok and valid with no finding (no noise, "
                       "bimodal or drifting samples, no contention)"])]
    if rows:
        out.append(table_block(["case", "status", "validity", "IQR", "findings (whole)"], rows, text_cols=(-1,),
                               row_classes=classes))
    return out


def _rate(value: Any, unit: str, scale: float) -> str:
    return f"{value / scale:,.1f} {unit}" if isinstance(value, int | float) and value else "not known"


def environment_rows(env: Environment) -> list[list[str]]:
    """(what, value, where it came from) rows: the machine, the software, the clocks and the peaks used."""
    rows = []
    for line in environment_lines(env):
        what, sep, value = line.partition(": ")
        if what == "frameworks":  # one row per framework below, with its details
            continue
        rows.append([what, value, "fingerprint"] if sep else [line.split(" ", 1)[0], line, "fingerprint"])
    for gpu in env.get("gpus") or []:
        detail = ", ".join(f"{k}={v}" for k, v in gpu.items() if k != "name" and not isinstance(v, dict | list))
        rows.append([f"GPU {gpu.get('index', '')}".strip(), f"{gpu.get('name')}: {detail}", "NVML"])
    for name, info in sorted((env.get("frameworks") or {}).items()):
        detail = ", ".join(f"{k}={v}" for k, v in info.items() if v is not None)
        rows.append([f"framework {name}", detail, "import in a worker"])
    cpu = env.get("cpu_peaks_theoretical") or {}
    if cpu:
        clock = f"{cpu['clock_ghz']:.2f} GHz" if cpu.get("clock_ghz") else "not determined"
        rows.append(["CPU clock", clock, str(cpu.get("clock_source") or "unknown")])
        if cpu.get("nominal_clock_ghz"):
            rows.append(["CPU nominal clock", f"{cpu['nominal_clock_ghz']:.2f} GHz",
                         str(cpu.get("nominal_clock_source") or "unknown")])
        rows.append(["CPU FP32 peak", _rate(cpu.get("fp32_flops_per_s"), "GFLOP/s", 1e9),
                     str(cpu.get("assumptions")) if cpu.get("fp32_basis") else  # it starts with the basis
                     f"{cpu.get('fp32_source') or 'unknown'}; {cpu.get('assumptions') or ''}".rstrip("; ")])
        sources = cpu.get("dtype_peaks_source") or {}
        for key, unit in (("fp64", "flops"), ("bf16", "flops"), ("fp16", "flops"), ("int8", "ops")):
            rows.append([f"CPU {key.upper()} peak", _rate(cpu.get(f"{key}_{unit}_per_s"), f"G{unit.upper()}/s", 1e9),
                         str(sources.get(key) or "unknown")])
        rows.append(["memory bandwidth (theoretical)", _rate(cpu.get("mem_bw_bytes_per_s"), "GB/s", 1e9),
                     str(cpu.get("mem_bw_source") or "unknown")])
        rows.append(["peaks from", str(cpu.get("peaks_source") or "unknown"), "hardware.peaks"])
    if env.get("peaks_overrides"):
        rows.append(["DLPERF_* overrides", json.dumps(env["peaks_overrides"], default=str), "environment at run start"])
    for device, c in sorted(((env.get("ceilings") or {}).get("devices") or {}).items()):
        levels = ", ".join(f"{lv.get('name')} {_rate(lv.get('bytes_per_s'), 'GB/s', 1e9)}"
                           for lv in c.get("levels") or [])
        rows.append([f"ceilings {device}", levels or "none",
                     f"measured at the start of the run ({c.get('threads')} threads)"])
    return rows


def environment_blocks(env: Environment, machines: Sequence[MachineShare] | None = None
                       ) -> list[Block]:
    """The environment table; the whole stored record is in the embedded JSON (and the details below it).
    For a run on several machines: the run's own environment (the machine that submitted it), a table of the
    machines its results came from, and the environment table of each machine but the submitting one."""
    own = table_block(["what", "value", "source"], environment_rows(env), text_cols=(1, 2))
    names = share_names(machines or [])
    if not machines or not names:
        return [own]
    out: list[Block] = [*text_blocks([f"The results of this run came from {len(machines)} machines (a fleet run); the "
                                      "first table is the run's own environment (where it was submitted), then each "
                                      "other machine's."])]
    out += [own, table_block(["machine", "machine id", "identity", "results", "environment ids"],
                             [[names[s.env_ids[0]], s.machine_id, describe_machine(s.env), str(len(s.results)),
                               ", ".join(map(str, s.env_ids))] for s in machines],
                             heading="### Machines of this run", text_cols=(0, 1, 2, 4))]
    for s in (s for s in machines if s.env != env):  # the submitting machine's is the table above
        out.append(table_block(["what", "value", "source"], environment_rows(s.env), text_cols=(1, 2),
                               heading=f"### Machine {names[s.env_ids[0]]}",
                               intro=f"{s.label}: {len(s.results)} result{'s' * (len(s.results) != 1)}"))
    return out
