"""A CPU's measured peak belongs to the machine: measured once, at a quiet moment, and reused.

Why: probed again on every run, the denominator of every % of peak and MFU drifted with the machine's load
(1.3% between two runs on a busy VM). So `machine_peak` measures the clock probe (`clock_probe.measure`) at
most `QUIET_TRIES` times while its threads' CPU/wall share says the machine is busy, keeps the quietest, and
stores it (with its spread and when it was measured) in `clock_probe.cache_dir()` under a key of the machine:
CPU model, vendor/family/model, flags, cores, the cores this process may use, architecture, host name, the
machine label (DLPERF_MACHINE_LABEL) and the probe's source. Later runs reuse it and say so
(`ClockProbe.origin`: "reused from <when> (<file>)"); a figure measured on a busy machine is measured again at
the first quiet moment. `REMEASURE_ENV=1` (or `dlperf hw show --remeasure`) measures it again and replaces it.
A result that could not measure (no compiler) is never stored.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import socket
import time
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path

import psutil

from dlperf.hardware import clock_probe, probe
from dlperf.hardware.fma_peak import ClockProbe

#: Set to 1 to measure the machine's peak again (and replace the stored one).
REMEASURE_ENV = "DLPERF_CPU_PEAK_REMEASURE"
#: Probes tried while the machine is busy, and the pause between them (seconds).
QUIET_TRIES, QUIET_PAUSE_S = 3, 0.3
#: Machine-wide CPU use (percent, over `QUIET_SAMPLE_S`) under which a moment counts as quiet.
QUIET_CPU_PERCENT, QUIET_SAMPLE_S = 25.0, 0.1


def machine_key(threads: int, cc: str) -> str:
    """A hash of what makes the measured peak this machine's (and this probe's)."""
    source = resources.files("dlperf.hardware").joinpath("clock_probe.c").read_text()
    facts = {
        "cpu_model": probe.cpu_model(), "cpu_id": probe.cpu_id(), "flags": sorted(probe.cpu_flag_set()),
        "physical_cores": probe.physical_cores(), "logical_cores": psutil.cpu_count(logical=True),
        "threads": threads, "machine": platform.machine(), "host": socket.gethostname(),
        "label": os.environ.get("DLPERF_MACHINE_LABEL", "").strip(), "cc": cc,
        "probe": hashlib.sha256(source.encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:20]


def _remeasure() -> bool:
    return os.environ.get(REMEASURE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def load(path: Path) -> ClockProbe | None:
    """The stored peak at `path`, or None where there is none or it cannot be read (then it is measured)."""
    try:
        data = json.loads(path.read_text())
        found = ClockProbe(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    except (OSError, ValueError, TypeError):
        return None
    return found if found.measured else None


def store(path: Path, found: ClockProbe) -> None:
    """Write `found` to `path` atomically (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**asdict(found), "origin": "measured now"}, indent=1))
    os.replace(tmp, path)


def quiet_now() -> bool:
    """Whether the machine is quiet at this moment (its CPU use over a tenth of a second)."""
    return psutil.cpu_percent(interval=QUIET_SAMPLE_S) < QUIET_CPU_PERCENT


def measure_quietly(*, threads: int, cc: str, cache: Path) -> ClockProbe:
    """The probe, tried again (up to QUIET_TRIES) while it says the machine is busy; the quietest try."""
    best: ClockProbe | None = None
    for attempt in range(QUIET_TRIES):
        if attempt:
            time.sleep(QUIET_PAUSE_S)
        found = clock_probe.measure(threads=threads, cc=cc, cache=cache)
        if not found.measured:
            return found
        if best is None or (found.cpu_wall_ratio or 0) > (best.cpu_wall_ratio or 0):
            best = found
        if not found.busy:
            break
    assert best is not None
    return replace(best, method=f"{best.method}; {attempt + 1} tries" if attempt else best.method)


def machine_peak(*, cache: Path | None = None, threads: int | None = None, cc: str | None = None,
                 remeasure: bool | None = None) -> ClockProbe:
    """This machine's probe result: the stored one where there is one (and it was quiet, or the machine is busy
    now), else measured now (quietly) and stored."""
    folder = cache or clock_probe.cache_dir()
    threads = threads or clock_probe.probe_threads()
    cc = cc if cc is not None else os.environ.get("CC") or "cc"
    path = folder / f"cpu-peak-{machine_key(threads, cc)}.json"
    stored = None if (_remeasure() if remeasure is None else remeasure) else load(path)
    if stored is not None and (not stored.busy or not quiet_now()):
        return replace(stored, origin=f"reused from {stored.measured_at} ({path}; {REMEASURE_ENV}=1 measures again)")
    found = measure_quietly(threads=threads, cc=cc, cache=folder)
    if found.measured:
        try:
            store(path, found)
        except OSError as exc:
            return replace(found, origin=f"measured now (not stored: {exc})")
        return replace(found, origin=f"measured now (stored in {path})")
    return found


@functools.cache
def sustained() -> ClockProbe:
    """This machine's probe result, once per process (CC, the cache folder and REMEASURE_ENV as at first use)."""
    return machine_peak()
