"""`dlperf doctor`: what this machine has for dlperf, and what is missing with the command to get it."""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass

from dlperf.hardware.probe import cpu_flags, cpu_model, nvidia_gpus, physical_cores


@dataclass(frozen=True)
class Check:
    section: str
    name: str
    ok: bool
    detail: str


def framework_checks() -> list[Check]:
    """Import each framework in a worker process: its logging stays out of this terminal."""
    from dlperf.core.jobs import ProbeJob
    from dlperf.runner.process import run_worker

    outcome = run_worker(ProbeJob(), timeout_s=300)
    if outcome.result.get("status") != "ok":
        return [Check("frameworks", "probe", False, f"framework probe failed: {outcome.result.get('reason')}")]
    out = []
    for name, r in outcome.result["frameworks"].items():
        if not r["installed"]:
            out.append(Check("frameworks", name, False, f"not installed: {r['hint']}"))
        elif "error" in r:
            out.append(Check("frameworks", name, False, f"{r['version']} installed but fails to load: {r['error']}"))
        else:
            out.append(Check("frameworks", name, True, f"{r['version']}; devices: {', '.join(r['devices'])}"))
    return out


def device_checks() -> list[Check]:
    import psutil

    flags = ", ".join(cpu_flags()) or "no vector flags read"
    out = [Check("devices", "cpu", True,
                 f"{cpu_model()}; {physical_cores()} physical / {psutil.cpu_count()} logical cores; "
                 f"{psutil.virtual_memory().total / 2**30:.1f} GiB RAM; {flags}")]
    gpus, source = nvidia_gpus()
    if gpus:
        for g in gpus:
            out.append(Check("devices", f"cuda:{g['index']}", True,
                             f"{g['name']}, {g['memory_bytes'] / 2**30:.0f} GiB, driver {g['driver']}"))
    else:
        out.append(Check("devices", "gpu", False, f"no GPU available: {source}"))
    return out


def meter_checks() -> list[Check]:
    """Each meter's own availability check: the same code that measures (or says why not) in a run."""
    from dlperf.meters import JetsonMeter, NvmlMeter, RaplMeter

    out = []
    for meter in (RaplMeter(), NvmlMeter(), JetsonMeter()):
        ok, why = meter.available()
        out.append(Check("energy meters", meter.name, ok, why))
    if not any(c.ok for c in out):
        out.append(Check("energy meters", "summary", False,
                         "no energy meter available: energy will be recorded as not measured"))
    return out


def profiler_checks() -> list[Check]:
    out = [Check("profilers", "cProfile", True, "Python standard library")]
    torch_ok = importlib.util.find_spec("torch") is not None
    out.append(Check("profilers", "torch.profiler", torch_ok,
                     "with torch" if torch_ok else "needs torch: pip install torch==2.13.0"))
    for tool, why in (("ncu", "Nsight Compute (NVIDIA CUDA toolkit)"), ("nsys", "Nsight Systems (NVIDIA CUDA toolkit)"),
                      ("perf", "Linux perf: apt-get install linux-perf")):
        path = shutil.which(tool)
        out.append(Check("profilers", tool, path is not None, path or f"not found: {why}"))
    return out


def all_checks() -> list[Check]:
    return framework_checks() + device_checks() + meter_checks() + profiler_checks()
