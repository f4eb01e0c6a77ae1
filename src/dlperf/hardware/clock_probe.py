"""The clock probe: a small C program (clock_probe.c, beside this module) that measures, on every core at
once, the FP32 FMA throughput of the widest vector unit, a dependent chain of vector FMAs (the clock under that
ISA's load) and a dependent chain of integer adds (the scalar clock). `hardware.fma_peak` turns these rates into
the FP32 peak, the vector clock and the FMA units; `hardware.peak_cache` keeps one measurement per machine.

Why measured: the clock /proc/cpuinfo or cpufreq reports is often the base clock (2.6 GHz on the development
VM) while the cores run at 3.4-4.1 GHz under vector load; and on Intel the AVX-512 licence clock sits below the
scalar clock (2.38 against 3.08 GHz on a Cascade Lake VM). The probe is compiled at run time with `$CC -O2`
(default `cc`) for the widest ISA the CPU flags name (AVX-512F, AVX2+FMA, NEON, else plain 128-bit vector
extensions), cached in `cache_dir()` under a hash of the source, compiler and flags (written to a temporary
file and renamed: two processes compiling at once cannot load half a file), loaded with ctypes and run on one
Python thread per core at once (ctypes releases the GIL), about 0.2-0.4 s in all. Rates are per CPU second of
each thread, so a thread descheduled by other work does not lower them; the least CPU/wall share is kept as a
sign of a busy machine. Where no compiler works, the result says so (`measured` False, `method` the reason)
and never carries an invented figure.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from dlperf.hardware import probe
from dlperf.hardware.fma_peak import ISA_NAMES, ClockProbe, ProbeRates, derive

#: (ISA as the C source names it, CPU flags it needs, compiler flags), widest first.
ISAS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("avx512f", frozenset({"avx512f"}), ("-mavx512f",)),
    ("avx2+fma", frozenset({"avx2", "fma"}), ("-mavx2", "-mfma")),
    ("neon", frozenset({"asimd"}), ()),
    ("avx", frozenset({"avx"}), ("-mavx",)),
    ("generic-128", frozenset(), ()),
)
#: Seconds per timed trial, trials per phase, warm-up seconds (lets the clock settle under vector load).
TRIAL_S, TRIALS, WARMUP_S = 0.015, 3, 0.015
#: Wall seconds after which a phase stops adding trials (a busy machine stretches CPU seconds into more).
PHASE_DEADLINE_S = 0.15


class ProbeUnavailable(Exception):
    """The probe could not be built or run here (no compiler, a failed build, a library that will not load)."""


def cache_dir() -> Path:
    """$DLPERF_CACHE_DIR (as for the ONNX exports), else $XDG_CACHE_HOME/dlperf, else ~/.cache/dlperf; a per-user
    temporary folder where that cannot be made. The test suite points DLPERF_CACHE_DIR at its own folder."""
    chosen = (os.environ.get("DLPERF_CACHE_DIR") or "").strip()
    xdg = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = Path(chosen) if chosen else xdg / "dlperf"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    fallback = Path(tempfile.gettempdir()) / f"dlperf-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def choose_isas(flags: frozenset[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The ISAs this CPU can run, widest first (a narrower one is tried where a build fails)."""
    return [(name, cflags) for name, needs, cflags in ISAS if needs <= flags]


def compile_probe(cc: str, cflags: tuple[str, ...], cache: Path) -> Path:
    """The probe's shared library for this compiler and flags, built once into `cache` (atomic rename)."""
    source = resources.files("dlperf.hardware").joinpath("clock_probe.c").read_text()
    argv = shlex.split(cc) or ["cc"]
    key = hashlib.sha256("\0".join([source, *argv, *cflags, platform.machine()]).encode()).hexdigest()[:16]
    out = cache / f"clock_probe-{key}.so"
    if out.exists():
        return out
    tmp = cache / f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        proc = subprocess.run([*argv, "-O2", "-shared", "-fPIC", *cflags, "-x", "c", "-", "-o", str(tmp)],
                              input=source, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ProbeUnavailable(f"no C compiler: {argv[0]!r} not found (set CC)") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeUnavailable(f"{argv[0]} could not run: {exc}") from None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (proc.stderr.strip().splitlines() or ["no message"])[0]
        raise ProbeUnavailable(f"{argv[0]} {' '.join(cflags)} failed: {first}")
    os.replace(tmp, out)
    return out


def _load(path: Path) -> Any:
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise ProbeUnavailable(f"the probe library would not load: {exc}") from None
    for fn in (lib.dlperf_fma, lib.dlperf_chain, lib.dlperf_fma_chain):
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    lib.dlperf_isa.restype = ctypes.c_char_p
    lib.dlperf_supported.restype = ctypes.c_int
    if not lib.dlperf_supported():
        raise ProbeUnavailable(f"this CPU does not run {lib.dlperf_isa().decode()} (cpuid), though its flags say so")
    lib.dlperf_lanes.restype = ctypes.c_int
    lib.dlperf_accumulators.restype = ctypes.c_int
    return lib


def _call(fn: Any, iters: int) -> tuple[float, float, float]:
    """(work done, CPU seconds, wall seconds) of one call."""
    wall, cpu = ctypes.c_double(), ctypes.c_double()
    work = fn(iters, ctypes.byref(wall), ctypes.byref(cpu))
    return work, cpu.value, wall.value


def _iterations(fn: Any, target_s: float) -> int:
    """Iterations of `fn` that take about `target_s` of CPU time here."""
    n = 1000
    while True:
        _work, cpu, _wall = _call(fn, n)
        if cpu >= 2e-3 or n >= 10**9:
            return max(1, int(n * target_s / max(cpu, 1e-9)))
        n *= 10


class ThreadRates(TypedDict):
    """What `_run` measured per probe thread: the `ProbeRates` the C library cannot say itself."""

    fma_flops_per_s: tuple[float, ...]
    fma_chain_per_s: tuple[float, ...]
    add_chain_per_s: tuple[float, ...]
    cpu_wall_ratio: float
    fma_trials_flops_per_s: tuple[float, ...]


def _run(lib: Any, threads: int) -> ThreadRates:
    """Per thread: the best FMA FLOP/s, dependent-FMA rate and add-chain rate (per CPU second), every FMA
    trial, and the least CPU/wall share. The FMA chain runs right after the FMA loop, under the same ISA's load."""
    fma_n = _iterations(lib.dlperf_fma, TRIAL_S)
    vchain_n, chain_n = _iterations(lib.dlperf_fma_chain, TRIAL_S / 3), _iterations(lib.dlperf_chain, TRIAL_S / 3)
    barrier = threading.Barrier(threads)
    fma, vchain, chain, shares = [0.0] * threads, [0.0] * threads, [0.0] * threads, [1.0] * threads
    trials: list[list[float]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def phase(fn: Any, n: int, deadline_s: float, best: list[float], i: int, keep: list[float] | None = None) -> None:
        deadline = time.perf_counter() + deadline_s
        for _ in range(TRIALS):
            work, cpu, wall = _call(fn, n)
            rate = work / cpu if cpu > 0 else 0.0
            best[i] = max(best[i], rate)
            shares[i] = min(shares[i], cpu / wall if wall > 0 else 1.0)
            if keep is not None:
                keep.append(rate)
            if time.perf_counter() > deadline:
                break

    def work(i: int) -> None:
        try:
            barrier.wait()
            _call(lib.dlperf_fma, max(1, int(fma_n * WARMUP_S / TRIAL_S)))  # warm-up: the clock settles
            phase(lib.dlperf_fma, fma_n, PHASE_DEADLINE_S, fma, i, trials[i])
            phase(lib.dlperf_fma_chain, vchain_n, PHASE_DEADLINE_S / 2, vchain, i)
            barrier.wait()
            phase(lib.dlperf_chain, chain_n, PHASE_DEADLINE_S / 2, chain, i)
        except BaseException as exc:  # reported by the caller, never lost in a thread
            barrier.abort()
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(i,), name=f"dlperf-clock-probe-{i}") for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise ProbeUnavailable(f"the probe failed: {errors[0]!r}")
    return {"fma_flops_per_s": tuple(fma), "fma_chain_per_s": tuple(vchain), "add_chain_per_s": tuple(chain),
            "cpu_wall_ratio": min(shares), "fma_trials_flops_per_s": tuple(x for t in trials for x in t)}


def _one_thread_rate(lib: Any) -> float:
    """The FMA loop's rate on one thread, the probe's others done: a core's rate when it is the only busy one
    (0.0 where that run failed: tried, no figure; the all-thread figures stand)."""
    try:
        return _run(lib, 1)["fma_flops_per_s"][0]
    except ProbeUnavailable:
        return 0.0


def probe_threads() -> int:
    """One probe thread per physical core this process may use (its affinity and its cgroup's CPU quota:
    more threads than the quota allows would stall each other and read a fraction of the clock)."""
    return probe.default_threads()


def measure(*, threads: int | None = None, cc: str | None = None, cache: Path | None = None,
            flags: frozenset[str] | None = None) -> ClockProbe:
    """Build (or reuse) and run the probe now: never raises; a probe that cannot run says why."""
    t0 = time.perf_counter()
    threads = threads or probe_threads()
    cc = cc if cc is not None else os.environ.get("CC") or "cc"
    flags = flags if flags is not None else probe.cpu_flag_set()
    failures = []
    for isa, cflags in choose_isas(flags):
        try:
            lib = _load(compile_probe(cc, cflags, cache or cache_dir()))
            found = _run(lib, threads)
        except (ProbeUnavailable, OSError) as exc:
            failures.append(f"{isa}: {exc}")
            if "no C compiler" in str(exc):
                break  # no narrower ISA will find a compiler either
            continue
        vendor, family, model = probe.cpu_id()
        rates = ProbeRates(isa=lib.dlperf_isa().decode(), lanes=int(lib.dlperf_lanes()),
                           accumulators=int(lib.dlperf_accumulators()), vendor=vendor, family=family, model=model,
                           **found)
        one = _one_thread_rate(lib) if threads > 1 else found["fma_flops_per_s"][0]
        seconds = time.perf_counter() - t0
        build = f"{shlex.split(cc)[0]} -O2 {' '.join(cflags)}".rstrip() + f", {seconds:.2f} s"
        return replace(derive(rates, threads=threads, seconds=seconds, build=build),
                       measured_at=datetime.now(UTC).isoformat(timespec="seconds"), one_thread_fma_flops_per_s=one)
    return ClockProbe(measured=False, method="; ".join(failures) or "no ISA to probe", threads=threads,
                      seconds=time.perf_counter() - t0)


__all__ = ["ISA_NAMES", "ClockProbe", "ProbeUnavailable", "cache_dir", "choose_isas", "compile_probe", "measure",
           "probe_threads"]
