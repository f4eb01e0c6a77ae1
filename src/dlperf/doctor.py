"""`dlperf doctor`: what this machine has for dlperf, and what is missing with the command to get it; and what
on it makes timings noisy, with what to change (`noise_checks`)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.hardware import peak_cache
from dlperf.hardware.fma_peak import ONE_CORE_SPEEDUP_MIN
from dlperf.hardware.probe import cpu_flags, cpu_model, nvidia_gpus, physical_cores


@dataclass(frozen=True)
class Check:
    section: str
    name: str
    ok: bool | None  # None: not known (a file that could not be read), shown as such
    detail: str


#: The section of the noise checks.
NOISE = "noise"
#: A canary check: a callable that runs the canary kernel (a fixed-work timing repeated to see how much the
#: machine drifts) and returns its Check, shown last in the noise section (`canary_check` is dlperf's).
CanaryCheck = Callable[[], Check]


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


def _check(section: str, item: Any) -> Check:
    """A `hardware.noise.NoiseItem` as a Check: what was read, then what to change where there is something."""
    return Check(section, item.name, item.quiet, item.state + (f"; {item.hint}" if item.hint else ""))


def profiler_checks(root: Path = Path("/")) -> list[Check]:
    """The profilers dlperf uses, and what `perf` may count here (kernel.perf_event_paranoid, read under `root`)."""
    from dlperf.hardware.noise import perf_paranoid

    out = [Check("profilers", "cProfile", True, "Python standard library")]
    torch_ok = importlib.util.find_spec("torch") is not None
    out.append(Check("profilers", "torch.profiler", torch_ok,
                     "with torch" if torch_ok else "needs torch: pip install torch==2.13.0"))
    for tool, why in (("ncu", "Nsight Compute (NVIDIA CUDA toolkit)"), ("nsys", "Nsight Systems (NVIDIA CUDA toolkit)"),
                      ("perf", "Linux perf: apt-get install linux-perf")):
        path = shutil.which(tool)
        out.append(Check("profilers", tool, path is not None, path or f"not found: {why}"))
    return [*out, _check("profilers", perf_paranoid(root))]


def noise_checks(root: Path = Path("/"), canary: CanaryCheck | None = None,
                 one_core_speedup: float | None = None) -> list[Check]:
    """What pyperf's `system show` reports (hardware.noise, read under `root`), each with what to change where it
    adds noise; then the canary's spread where `canary` is given (`CanaryCheck`). `one_core_speedup`: the clock
    probe's one core alone over each of all busy (`measured_one_core_speedup`), shown with turbo."""
    from dlperf.hardware.noise import read_noise

    out = [_check(NOISE, item) for item in read_noise(root, one_core_speedup, ONE_CORE_SPEEDUP_MIN)]
    if canary is not None:
        out.append(canary())
    return out


#: How often `dlperf doctor` runs the canary, and the pause between two (spreads the times over ~1-2 s).
CANARY_TIMES, CANARY_PAUSE_S = 12, 0.05


def canary_check(times: int = CANARY_TIMES, pause_s: float = CANARY_PAUSE_S, canary: Any = None) -> Check:
    """The canary kernel (runner.canary, the one the sweep runs between cases) timed `times` times here: its
    spread is how steady this machine is over a second or two, noise that neither contention nor steal shows.
    `canary`: a `Canary` (one with a fake clock in tests); a new one by default."""
    import time

    from dlperf.runner.canary import UNSTABLE_SPREAD, Canary, stats

    canary = canary or Canary()
    series = []
    for _ in range(times):
        series.append(canary.measure())
        time.sleep(pause_s)
    st = stats(series)
    if st is None:
        return Check(NOISE, "canary", None, "not measured: fewer than 2 canary times")
    detail = (f"{st.n} times over {st.duration_s:.1f} s: median {st.median_s * 1e3:.1f} ms, spread "
              f"{st.spread_rel:.1%} (max-min)")
    if st.unstable:
        detail += (f", above {UNSTABLE_SPREAD:.0%}: this machine's speed moves by itself; use `dlperf run "
                   "--precision PCT` for more processes per case, pin --threads, and compare runs made close in time")
    return Check(NOISE, "canary", not st.unstable, detail)


def measured_one_core_speedup() -> float | None:
    """This machine's clock probe (`peak_cache.sustained`: stored, else measured now, about a second): one core
    alone's FMA rate over each of all busy, or None where the probe could not run."""
    return peak_cache.sustained().one_core_speedup


def all_checks(canary: CanaryCheck | None = canary_check,
               one_core_speedup: Callable[[], float | None] | None = measured_one_core_speedup) -> list[Check]:
    """Every section; `canary`: the canary kernel's check (None leaves it out); `one_core_speedup`: where turbo's
    measured figure comes from (None leaves it out)."""
    return (framework_checks() + device_checks() + meter_checks() + profiler_checks()
            + noise_checks(canary=canary, one_core_speedup=one_core_speedup() if one_core_speedup else None))
