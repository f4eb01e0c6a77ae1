"""From the clock probe's measured rates to a CPU's FP32 peak, its clock under vector load and its FMA units:
a pure derivation (no C library, no timing), so the paths of other machines are tested with recorded rates.

What the probe measures (rates per second of each thread's CPU time, `ProbeRates`):
- an FMA loop with independent accumulators: FP32 FLOP/s per core. This *is* the FP32 peak: what the cores
  sustain under the probed ISA's load. The peak is never a model that could sit above it;
- one dependent chain of vector FMAs of the same ISA: FMAs per second. Times the FMA latency in cycles
  (`FMA_LATENCY`, per microarchitecture) it is the clock under that ISA's load (Intel's AVX2/AVX-512
  frequency licences set it below the scalar clock: 2.67 against 3.08 GHz on a Cascade Lake VM);
- a dependent chain of integer adds (1 cycle each): the scalar clock, recorded beside, never used for vector
  work.
FMA units per core = FMA FLOP/s / (vector clock x lanes x 2): `measured` where that is within
`WHOLE_TOLERANCE` of a whole number, else the nearest whole number `assumed` (and labelled so). Where the
latency of this CPU is not in the table, no clock and no units are derived (the scalar clock is the wrong
clock on Intel), and the peak is still the measured FMA throughput.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

ISA_NAMES = {"avx512f": "AVX-512 FMA", "avx2+fma": "AVX2 FMA", "neon": "NEON FMA", "avx": "AVX multiply+add",
             "generic-128": "128-bit multiply+add"}
#: What a measured clock (GHz) and FMA-units ratio may be; outside this the figure is not trusted.
PLAUSIBLE_GHZ, PLAUSIBLE_UNITS = (0.2, 7.0), (0.5, 4.5)
#: How close to a whole number the units ratio must be to count as measured (else: the nearest, assumed).
WHOLE_TOLERANCE = 0.15
#: A probe thread that ran less than this share of the wall time ran on a busy machine.
BUSY_SHARE = 0.9
#: One core alone this much faster than each with all busy (the probe's one-thread run), or more: a CPU whose clock
#: rises as fewer cores are busy (turbo), so a share of its all-core peak would sit below what fewer threads reach
#: (`roofline.cpu_share`), and `dlperf doctor` names turbo as seen. Under it (a VM: 1.00 +- noise): no turbo seen.
ONE_CORE_SPEEDUP_MIN = 1.03

_INTEL_4 = {0x4E, 0x5E, 0x8E, 0x9E, 0xA5, 0xA6, 0x55, 0x66, 0x7D, 0x7E, 0x6A, 0x6C, 0x8C, 0x8D, 0xA7, 0x8F, 0xCF,
            0xAD, 0xAE}
#: Latency in cycles of one vector FP32 FMA (VFMADD..PS, 256 and 512 bits), by (vendor, family, models):
#: Intel's optimization manual and Agner Fog's instruction tables; an empty model set: every model of it.
FMA_LATENCY: tuple[tuple[str, int, frozenset[int], int, str], ...] = (
    ("GenuineIntel", 6, frozenset({0x3C, 0x3F, 0x45, 0x46}), 5, "Intel Haswell"),
    ("GenuineIntel", 6, frozenset({0x3D, 0x47, 0x4F, 0x56}), 5, "Intel Broadwell"),
    ("GenuineIntel", 6, frozenset({0x55}), 4, "Intel Skylake-SP/Cascade Lake/Cooper Lake"),
    ("GenuineIntel", 6, frozenset({0x8F, 0xCF, 0xAD, 0xAE}), 4, "Intel Sapphire/Emerald/Granite Rapids"),
    ("GenuineIntel", 6, frozenset(_INTEL_4 - {0x55, 0x8F, 0xCF, 0xAD, 0xAE}), 4,
     "Intel Skylake/Ice Lake/Tiger Lake/Rocket Lake client cores"),
    ("AuthenticAMD", 0x17, frozenset(), 5, "AMD Zen/Zen+/Zen 2"),
    ("AuthenticAMD", 0x19, frozenset(range(0x10, 0x20)) | frozenset(range(0x60, 0x80)) | frozenset(range(0xA0, 0xB0)),
     4, "AMD Zen 4"),
    ("AuthenticAMD", 0x19, frozenset(), 4, "AMD Zen 3"),  # Zen 3 cut Zen 2's 5 cycles to 4
    ("AuthenticAMD", 0x1A, frozenset(), 4, "AMD Zen 5"),
)
#: ISAs whose chain is one FMA instruction (the others multiply then add: no latency in the table).
FMA_ISAS = frozenset({"avx512f", "avx2+fma"})


def fma_latency(vendor: str | None, family: int | None, model: int | None, isa: str) -> tuple[int | None, str]:
    """(cycles of one dependent vector FMA, which core that is) or (None, why it is not known)."""
    if isa not in FMA_ISAS:
        return None, f"no FMA latency table for {ISA_NAMES.get(isa, isa)}"
    for v, fam, models, cycles, name in FMA_LATENCY:
        if vendor == v and family == fam and (not models or model in models):
            return cycles, name
    return None, (f"the FMA latency of this CPU ({vendor or 'unknown vendor'} family {family} model {model}) "
                  f"is not in the table")


@dataclass(frozen=True)
class ProbeRates:
    """What the C probe measured, per thread (each the best of its trials, per CPU second)."""

    isa: str
    lanes: int  # FP32 lanes of one vector register of `isa`
    accumulators: int
    fma_flops_per_s: tuple[float, ...]  # FMA loop, FP32 FLOP/s per thread
    add_chain_per_s: tuple[float, ...]  # dependent integer adds per second per thread (1 cycle each)
    fma_chain_per_s: tuple[float, ...]  # dependent vector FMAs per second per thread
    cpu_wall_ratio: float  # the least CPU/wall share of a probe thread: well under 1 on a busy machine
    vendor: str | None = None  # /proc/cpuinfo vendor_id
    family: int | None = None
    model: int | None = None
    fma_trials_flops_per_s: tuple[float, ...] = ()  # every timed trial of every thread: the spread


@dataclass(frozen=True)
class ClockProbe:
    """What the probe found. Rates are per core (per thread of the probe) and in total over its threads."""

    measured: bool
    method: str  # how it was measured, or why it was not
    threads: int
    seconds: float  # wall time the probe took (compile excluded where the library was cached)
    isa: str | None = None
    lanes: int | None = None
    clock_ghz: float | None = None  # the FMA loop's own clock: FMA FLOP/s per core / (units x lanes x 2)
    scalar_clock_ghz: float | None = None  # the dependent add chain's rate: recorded, not used for vector work
    vector_clock_ghz: float | None = None  # dependent vector FMA chain x its latency: the clock under vector load
    vector_clock_source: str | None = None
    fma_chain_ns: float | None = None  # one dependent vector FMA
    fma_latency_cycles: int | None = None
    fma_flops_per_s_per_core: float | None = None  # median over threads: the FP32 peak per core
    fma_flops_per_s_total: float | None = None
    fma_spread_rel: float | None = None  # (max - min) / median of every FMA trial of every thread
    fma_units: int | None = None
    fma_units_ratio: float | None = None  # FMA FLOP/s / (vector clock x lanes x 2), before rounding
    fma_units_source: str | None = None  # "measured: ..." or "assumed ...: ..." or "not determined: ..."
    cpu_wall_ratio: float | None = None
    busy: bool | None = None  # a probe thread ran less than BUSY_SHARE of the wall time
    cpu_vendor: str | None = None
    cpu_family: int | None = None
    cpu_model_number: int | None = None
    measured_at: str | None = None  # ISO time of the measurement
    origin: str = "measured now"  # or "reused from <measured_at> (<file>)"
    tries: int = 1  # probes run to find this one (`peak_cache.measure_best`): the best is kept
    tries_fma_flops_per_s_per_core: tuple[float, ...] = ()  # every try's FMA FLOP/s per core, in order
    #: the FMA loop on one probe thread with the other cores idle: where fewer busy cores clock higher (turbo on
    #: bare metal), a case on fewer threads than cores can run each one faster than the all-core rate above
    #: (0.0: that run failed; None: a probe by a dlperf before it)
    one_thread_fma_flops_per_s: float | None = None
    tries_one_thread_fma_flops_per_s: tuple[float, ...] = ()  # every try's one-thread rate, in order (its spread)

    @property
    def one_core_speedup(self) -> float | None:
        """One probe thread's FMA rate over the all-thread rate per core (1.0: no faster alone), or None."""
        one, every = self.one_thread_fma_flops_per_s, self.fma_flops_per_s_per_core
        return one / every if one and every else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: what was measured, the clock used and where the figure came from; or why nothing was."""
        if not self.measured:
            return f"not measured: {self.method}"
        per_core = (self.fma_flops_per_s_per_core or 0) / 1e9
        clock = (f"{self.clock_ghz:.2f} GHz under FMA load" if self.clock_ghz
                 else "clock under FMA load not determined")
        return (f"measured: {ISA_NAMES.get(self.isa or '', self.isa)} loop, {self.threads} threads, "
                f"{per_core:.1f} GFLOP/s per core, {clock}; {self.origin}")


def _median(xs: tuple[float, ...]) -> float:
    return statistics.median(xs) if xs else 0.0


def derive(rates: ProbeRates, *, threads: int, seconds: float, build: str = "") -> ClockProbe:
    """The probe's result from its rates: the FP32 peak per core (the FMA loop), the vector clock, the units."""
    per_core, scalar_hz, chain = _median(rates.fma_flops_per_s), _median(rates.add_chain_per_s), \
        _median(rates.fma_chain_per_s)
    trials = rates.fma_trials_flops_per_s or rates.fma_flops_per_s
    latency, core = fma_latency(rates.vendor, rates.family, rates.model, rates.isa)
    busy = rates.cpu_wall_ratio < BUSY_SHARE
    base = ClockProbe(measured=False, method="", threads=threads, seconds=seconds, isa=rates.isa, lanes=rates.lanes,
                      scalar_clock_ghz=scalar_hz / 1e9 or None, fma_chain_ns=1e9 / chain if chain > 0 else None,
                      fma_latency_cycles=latency, fma_flops_per_s_per_core=per_core,
                      fma_flops_per_s_total=sum(rates.fma_flops_per_s),
                      fma_spread_rel=(max(trials) - min(trials)) / per_core if per_core > 0 and trials else None,
                      cpu_wall_ratio=rates.cpu_wall_ratio, busy=busy, cpu_vendor=rates.vendor,
                      cpu_family=rates.family, cpu_model_number=rates.model)
    if per_core <= 0:
        return replace(base, method="the FMA loop measured no work: not used")
    flops_per_cycle_unit = rates.lanes * 2
    vector_hz = chain * latency if latency and chain > 0 else 0.0
    if latency is None:
        vsource = f"not measured: {core}; the scalar clock is not used for vector work"
    elif not PLAUSIBLE_GHZ[0] <= vector_hz / 1e9 <= PLAUSIBLE_GHZ[1]:
        vsource, vector_hz = f"implausible: {vector_hz / 1e9:.2f} GHz from the FMA chain, not used", 0.0
    else:
        vsource = (f"a dependent {ISA_NAMES.get(rates.isa, rates.isa)} chain, {1e9 / chain:.3f} ns per FMA x "
                   f"{latency} cycles ({core})")
    ratio = per_core / (vector_hz * flops_per_cycle_unit) if vector_hz else None
    units, clock_hz = None, None
    if ratio is None:
        units_source = f"not determined: no clock under vector load ({vsource})"
    elif not PLAUSIBLE_UNITS[0] <= ratio <= PLAUSIBLE_UNITS[1]:
        units_source = f"not determined: {ratio:.2f} units' worth at the vector clock is implausible"
    else:
        units = max(1, round(ratio))
        clock_hz = per_core / (units * flops_per_cycle_unit)
        if abs(ratio - units) <= WHOLE_TOLERANCE:
            units_source = f"measured: {ratio:.2f} units' worth at the vector clock {vector_hz / 1e9:.2f} GHz"
        else:
            units_source = (f"assumed {units}: the nearest whole number to {ratio:.2f} units' worth at the vector "
                            f"clock {vector_hz / 1e9:.2f} GHz (one FMA chain); the FMA loop then ran at "
                            f"{clock_hz / 1e9:.2f} GHz")
    how = (f"{per_core / 1e9:.1f} GFLOP/s per core (median of {len(rates.fma_flops_per_s)} threads, spread "
           f"{100 * (base.fma_spread_rel or 0):.1f}%) in an FMA loop of {rates.accumulators} accumulators; "
           f"vector clock: {vsource}; FMA units: {units_source}; scalar add-chain clock {scalar_hz / 1e9:.2f} GHz "
           f"(recorded, not used)")
    if build:
        how += f"; {build}"
    if busy:
        how += (f"; busy machine: a probe thread ran {100 * rates.cpu_wall_ratio:.0f}% of the wall time "
                f"(rates per CPU second)")
    return replace(base, measured=True, method=how, clock_ghz=clock_hz / 1e9 if clock_hz else None,
                   vector_clock_ghz=vector_hz / 1e9 or None, vector_clock_source=vsource, fma_units=units,
                   fma_units_ratio=ratio, fma_units_source=units_source)
