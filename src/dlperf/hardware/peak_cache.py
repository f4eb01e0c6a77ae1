"""A CPU's measured peak belongs to the machine: measured once, at a quiet moment, and reused.

Why: probed again on every run, the denominator of every % of peak and MFU drifted with the machine's load
(1.3% between two runs on a busy VM). And one probe lasts a tenth of a second: on a VM disturbed from outside
the guest, where neither the probe's CPU/wall share nor steal shows it, one probe in twenty read half or four
fifths of the machine's rate (measured on the development VM, 2026-11-29), and a peak stored from it would make
every % of peak up to twice too high and a GEMM "above 100%". So `machine_peak` runs the clock probe
(`clock_probe.measure`, `measure_best`) `MIN_TRIES` to `MAX_TRIES` times, a pause apart, until the two fastest
quiet tries agree within `AGREE_REL`, keeps the fastest quiet one (a peak is what the machine can do: nothing
makes the loop faster than the silicon), and stores it (with its spread, every try's rate and when it was
measured) in `clock_probe.cache_dir()` under a key of the machine: CPU model, vendor/family/model, flags, cores,
the cores this process may use, architecture, host name, the machine label (DLPERF_MACHINE_LABEL) and the
probe's source. Later runs reuse it and say so
(`ClockProbe.origin`: "reused from <when> (<file>)"); a figure measured on a busy machine is measured again at
the first quiet moment. `REMEASURE_ENV=1` (or `dlperf hw show --remeasure`) measures it again and replaces it.
A result that could not measure (no compiler) is never stored; one that an earlier dlperf stored from a single
probe is measured again.
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
#: Probes run at least and at most, the pause between them (seconds), and how close (relative) the two fastest
#: quiet ones must be to stop: a disturbance from outside lasts seconds, longer than one probe.
MIN_TRIES, MAX_TRIES, TRY_PAUSE_S, AGREE_REL = 3, 8, 0.25, 0.03
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


def _per_core(found: ClockProbe) -> float:
    return found.fma_flops_per_s_per_core or 0.0


def _settled(tries: list[ClockProbe]) -> bool:
    """Enough tries: at least MIN_TRIES, and the two fastest quiet ones agree (or every try so far was busy: such
    a figure is measured again at the first quiet moment anyway)."""
    if len(tries) < MIN_TRIES:
        return False
    quiet = sorted((_per_core(t) for t in tries if not t.busy), reverse=True)
    return not quiet or (len(quiet) >= 2 and quiet[1] >= quiet[0] * (1 - AGREE_REL))


def measure_best(*, threads: int, cc: str, cache: Path) -> ClockProbe:
    """The probe run until `_settled` (at most MAX_TRIES), TRY_PAUSE_S apart: the fastest quiet try, else the
    fastest busy one (the quietest of equals), with every try's rate recorded (`tries_fma_flops_per_s_per_core`)
    and named in `method`; one core alone's rate is the fastest of every try's (a dip in one try is no peak)."""
    tries: list[ClockProbe] = []
    start = time.perf_counter()
    while len(tries) < MAX_TRIES and not _settled(tries):
        if tries:
            time.sleep(TRY_PAUSE_S)
        found = clock_probe.measure(threads=threads, cc=cc, cache=cache)
        if not found.measured:
            return found
        tries.append(found)
    quiet = [t for t in tries if not t.busy]
    # The fastest, as a peak is: a dip from outside the guest shows in no busy flag, so a quiet-looking slow try
    # is no better. Quiet tries first (with the other cores idle the loop's clock is the all-core one).
    best = max(quiet or tries, key=lambda t: (_per_core(t), t.cpu_wall_ratio or 0.0))
    rates = tuple(_per_core(t) for t in tries)
    how = (f"the fastest {'quiet' if quiet else 'busy'} one of {len(tries)} probes over "
           f"{time.perf_counter() - start:.1f} s (FMA loop {min(rates) / 1e9:.1f}-{max(rates) / 1e9:.1f} GFLOP/s "
           f"per core across them)")
    alone = tuple(t.one_thread_fma_flops_per_s or 0.0 for t in tries)  # 0.0: tried, did not run
    return replace(best, method=f"{best.method}; {how}", tries=len(tries), tries_fma_flops_per_s_per_core=rates,
                   one_thread_fma_flops_per_s=max(alone, default=0.0),  # a peak: the fastest, as above
                   tries_one_thread_fma_flops_per_s=alone)


def machine_peak(*, cache: Path | None = None, threads: int | None = None, cc: str | None = None,
                 remeasure: bool | None = None) -> ClockProbe:
    """This machine's probe result: the stored one where there is one (and it was quiet, or the machine is busy
    now), else measured now (`measure_best`) and stored."""
    folder = cache or clock_probe.cache_dir()
    threads = threads or clock_probe.probe_threads()
    cc = cc if cc is not None else os.environ.get("CC") or "cc"
    path = folder / f"cpu-peak-{machine_key(threads, cc)}.json"
    stored = None if (_remeasure() if remeasure is None else remeasure) else load(path)
    if stored is not None and stored.tries < MIN_TRIES:  # one probe, by a dlperf before measure_best: not trusted
        stored = None
    if stored is not None and stored.one_thread_fma_flops_per_s is None:  # by a dlperf before the one-thread run
        stored = None
    if stored is not None and (not stored.busy or not quiet_now()):
        return replace(stored, origin=f"reused from {stored.measured_at} ({path}; {REMEASURE_ENV}=1 measures again)")
    found = measure_best(threads=threads, cc=cc, cache=folder)
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
