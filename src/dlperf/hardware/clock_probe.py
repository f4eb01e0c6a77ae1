"""The clock this CPU sustains under its widest vector unit, and its FMA throughput, measured here.

Why: the clock /proc/cpuinfo or cpufreq reports is often the base clock (2.6 GHz on the development VM),
while the cores run at 3.4-4.1 GHz under vector load; a peak built on the nominal clock sits below what a
GEMM reaches. So a small C probe (clock_probe.c, beside this module) is compiled at run time with
`$CC -O2` (default `cc`) for the widest ISA the CPU flags name (AVX-512F, AVX2+FMA, NEON, else plain
128-bit vector extensions), cached in $XDG_CACHE_HOME/dlperf (or ~/.cache/dlperf) under a hash of the
source, compiler and flags (written to a temporary file and renamed: two processes compiling at once
cannot load half a file), loaded with ctypes and run on one Python thread per core at once (ctypes
releases the GIL), about 0.1-0.2 s in all:
- an FMA loop with independent accumulators: FLOP/s per second of the thread's CPU time;
- a dependent chain of register adds (latency 1 cycle): adds per CPU second = the core's clock.
FMA units per core = FMA FLOP/s per core / (add-chain clock x lanes x 2), rounded; the sustained clock
under FMA load = FMA FLOP/s per core / (units x lanes x 2). Rates are per CPU second of each thread, so
a thread descheduled by other work does not lower them; the least CPU/wall share is kept as a sign of
a busy machine. Where no compiler works, the result says so (`measured` False, `method` the reason) and
never carries an invented figure. The result is cached per process (`sustained`).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shlex
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from dlperf.hardware import probe

#: (ISA as the C source names it, CPU flags it needs, compiler flags), widest first.
ISAS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("avx512f", frozenset({"avx512f"}), ("-mavx512f",)),
    ("avx2+fma", frozenset({"avx2", "fma"}), ("-mavx2", "-mfma")),
    ("neon", frozenset({"asimd"}), ()),
    ("avx", frozenset({"avx"}), ("-mavx",)),
    ("generic-128", frozenset(), ()),
)
ISA_NAMES = {"avx512f": "AVX-512 FMA", "avx2+fma": "AVX2 FMA", "neon": "NEON FMA", "avx": "AVX multiply+add",
             "generic-128": "128-bit multiply+add"}
#: Seconds per timed trial, trials per phase, warm-up seconds (lets the clock settle under vector load).
TRIAL_S, TRIALS, WARMUP_S = 0.015, 3, 0.015
#: Wall seconds after which a phase stops adding trials (a busy machine stretches CPU seconds into more).
PHASE_DEADLINE_S = 0.15
#: What a measured clock (GHz) and FMA-units ratio may be; outside this the probe is not trusted.
PLAUSIBLE_GHZ, PLAUSIBLE_UNITS = (0.2, 7.0), (0.5, 4.5)


class ProbeUnavailable(Exception):
    """The probe could not be built or run here (no compiler, a failed build, a library that will not load)."""


@dataclass(frozen=True)
class ClockProbe:
    """What the probe found. Rates are per core (per thread of the probe) and in total over its threads."""

    measured: bool
    method: str  # how it was measured, or why it was not
    threads: int
    seconds: float  # wall time the probe took (compile excluded where the library was cached)
    isa: str | None = None
    lanes: int | None = None  # FP32 lanes of one vector register of `isa`
    clock_ghz: float | None = None  # sustained under FMA load: FMA FLOP/s per core / (units x lanes x 2)
    scalar_clock_ghz: float | None = None  # the dependent add chain's rate
    fma_flops_per_s_per_core: float | None = None
    fma_flops_per_s_total: float | None = None
    fma_units: int | None = None
    fma_units_ratio: float | None = None  # before rounding
    cpu_wall_ratio: float | None = None  # least CPU/wall share of a probe thread: well under 1 on a busy machine

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: 'measured: AVX-512 FMA probe, 2 threads, 3.39 GHz sustained (...)' or why not."""
        if not self.measured:
            return f"not measured: {self.method}"
        return (f"measured: {ISA_NAMES.get(self.isa or '', self.isa)} probe, {self.threads} threads, "
                f"{self.clock_ghz:.2f} GHz sustained ({self.method})")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/dlperf or ~/.cache/dlperf; a per-user temporary folder where that cannot be made."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dlperf"
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
    for fn in (lib.dlperf_fma, lib.dlperf_chain):
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


def _run(lib: Any, threads: int) -> tuple[list[float], list[float], float]:
    """Per thread: best FMA FLOP/s and best add-chain adds/s (per CPU second), and the least CPU/wall share."""
    fma_n, chain_n = _iterations(lib.dlperf_fma, TRIAL_S), _iterations(lib.dlperf_chain, TRIAL_S / 3)
    barrier = threading.Barrier(threads)
    fma, chain, shares = [0.0] * threads, [0.0] * threads, [1.0] * threads
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait()
            deadline = time.perf_counter() + PHASE_DEADLINE_S
            _call(lib.dlperf_fma, max(1, int(fma_n * WARMUP_S / TRIAL_S)))  # warm-up: the clock settles
            for _ in range(TRIALS):
                flops, cpu, wall = _call(lib.dlperf_fma, fma_n)
                fma[i] = max(fma[i], flops / cpu if cpu > 0 else 0.0)
                shares[i] = min(shares[i], cpu / wall if wall > 0 else 1.0)
                if time.perf_counter() > deadline:
                    break
            barrier.wait()
            deadline = time.perf_counter() + PHASE_DEADLINE_S / 2
            for _ in range(TRIALS):
                adds, cpu, _wall = _call(lib.dlperf_chain, chain_n)
                chain[i] = max(chain[i], adds / cpu if cpu > 0 else 0.0)
                if time.perf_counter() > deadline:
                    break
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
    return fma, chain, min(shares)


def probe_threads() -> int:
    """One probe thread per physical core this process may run on."""
    cores = probe.physical_cores()
    try:
        return max(1, min(cores, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, cores)


def measure(*, threads: int | None = None, cc: str | None = None, cache: Path | None = None,
            flags: frozenset[str] | None = None) -> ClockProbe:
    """Build (or reuse) and run the probe: never raises; a probe that cannot run says why."""
    t0 = time.perf_counter()
    threads = threads or probe_threads()
    cc = cc if cc is not None else os.environ.get("CC") or "cc"
    flags = flags if flags is not None else probe.cpu_flag_set()
    failures = []
    for isa, cflags in choose_isas(flags):
        try:
            lib = _load(compile_probe(cc, cflags, cache or cache_dir()))
            fma, chain, share = _run(lib, threads)
        except (ProbeUnavailable, OSError) as exc:
            failures.append(f"{isa}: {exc}")
            if "no C compiler" in str(exc):
                break  # no narrower ISA will find a compiler either
            continue
        return _result(lib, fma, chain, share, threads, cflags, cc, time.perf_counter() - t0)
    return ClockProbe(measured=False, method="; ".join(failures) or "no ISA to probe", threads=threads,
                      seconds=time.perf_counter() - t0)


def _result(lib: Any, fma: list[float], chain: list[float], share: float, threads: int, cflags: tuple[str, ...],
            cc: str, seconds: float) -> ClockProbe:
    isa, lanes, acc = lib.dlperf_isa().decode(), int(lib.dlperf_lanes()), int(lib.dlperf_accumulators())
    per_core, scalar_hz = statistics.median(fma), statistics.median(chain)
    base = ClockProbe(measured=False, method="", threads=threads, seconds=seconds, isa=isa, lanes=lanes,
                      scalar_clock_ghz=scalar_hz / 1e9, fma_flops_per_s_per_core=per_core,
                      fma_flops_per_s_total=sum(fma), cpu_wall_ratio=share)
    ratio = per_core / (scalar_hz * lanes * 2) if scalar_hz > 0 else 0.0
    ghz_ok = PLAUSIBLE_GHZ[0] <= scalar_hz / 1e9 <= PLAUSIBLE_GHZ[1]
    if not (ghz_ok and PLAUSIBLE_UNITS[0] <= ratio <= PLAUSIBLE_UNITS[1]):
        return _replace(base, fma_units_ratio=ratio,
                        method=(f"implausible probe result ({scalar_hz / 1e9:.2f} GHz add chain, FMA ratio "
                                f"{ratio:.2f}): not used"))
    units = max(1, round(ratio))
    clock_hz = per_core / (units * lanes * 2)
    how = f"{per_core / 1e9:.0f} GFLOP/s per core = {units} FMA units x {lanes} lanes x 2 x {clock_hz / 1e9:.2f} GHz"
    if abs(ratio - units) > 0.2:  # not a whole number of units per cycle: the loop fell short of the units
        units, clock_hz = math.ceil(ratio), scalar_hz
        how = (f"{per_core / 1e9:.0f} GFLOP/s per core is {ratio:.2f} units' worth at the add-chain clock, not a whole "
               f"number: assumed {units} units at {clock_hz / 1e9:.2f} GHz (an upper bound)")
    method = (f"{how}; dependent-add clock {scalar_hz / 1e9:.2f} GHz; {shlex.split(cc)[0]} -O2 "
              f"{' '.join(cflags)}".rstrip() + f", {acc} accumulators, {seconds:.2f} s")
    if share < 0.9:
        method += f"; busy machine: a probe thread ran {100 * share:.0f}% of the wall time (rates per CPU second)"
    return _replace(base, measured=True, method=method, clock_ghz=clock_hz / 1e9, fma_units=units,
                    fma_units_ratio=ratio)


def _replace(p: ClockProbe, **changes: Any) -> ClockProbe:
    return ClockProbe(**{**asdict(p), **changes})


@functools.cache
def sustained() -> ClockProbe:
    """This machine's probe result, measured once per process (CC and the cache folder as set at first use)."""
    return measure()
