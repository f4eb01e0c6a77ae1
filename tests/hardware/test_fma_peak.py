"""The FP32 peak, the clock under vector load and the FMA units, derived from the clock probe's rates as
measured on other machines (recorded inputs: /work/shared/MACHINE-NOTES.md and issue 28), so that each CPU's
path is tested wherever the suite runs."""

from __future__ import annotations

import pytest

from dlperf.hardware import peaks
from dlperf.hardware.fma_peak import ProbeRates, derive, fma_latency

AVX512 = ["avx2", "fma", "avx512f"]


def _rates(vendor: str, family: int, model: int, fma: tuple[float, ...], add: float, chain_ns: float | None,
           *, isa: str = "avx512f", lanes: int = 16, share: float = 0.99) -> ProbeRates:
    return ProbeRates(isa=isa, lanes=lanes, accumulators=16, fma_flops_per_s=fma, add_chain_per_s=(add,) * len(fma),
                      fma_chain_per_s=(1e9 / chain_ns if chain_ns else 0.0,) * len(fma), cpu_wall_ratio=share,
                      vendor=vendor, family=family, model=model, fma_trials_flops_per_s=fma)


#: Cascade Lake VM (family 6 model 85): the FMA loop at 151.6-152.3 GFLOP/s per core, the scalar add chain at
#: 3.08 GHz, one dependent AVX-512 FMA chain at ~1.5 ns per FMA (issue 28).
CASCADE = _rates("GenuineIntel", 6, 85, (151.6e9, 152.3e9), 3.08e9, 1.5)
#: Sapphire Rapids VM (family 6 model 143): ~215-217 GFLOP/s per core (64 FLOP/cycle at ~3.39 GHz), the
#: dependent-multiply clock 3.58-3.68 GHz. Its FMA chain was not recorded: 1.18 ns (4 cycles at 3.39 GHz) is
#: an input consistent with the recorded loop, not a measurement.
SAPPHIRE = _rates("GenuineIntel", 6, 143, (215e9, 217e9), 3.62e9, 1.18)
#: Zen 4 (family 25 model 17, Genoa) at 3.7 GHz: AVX-512 runs on two 256-bit FMA pipes, 32 FP32 FLOP/cycle
#: per core (one 512-bit FMA per cycle); no licence clock, so the scalar and vector clocks agree.
ZEN4 = _rates("AuthenticAMD", 25, 17, (118.4e9, 118.0e9), 3.7e9, 4 / 3.7)
#: Zen 3 (family 25 model 1, Milan) at 3.5 GHz, AVX2: two 256-bit FMA pipes, 32 FP32 FLOP/cycle per core, an FMA
#: latency of 4 cycles. Inputs consistent with those facts, not a recording of such a machine.
ZEN3 = _rates("AuthenticAMD", 25, 1, (112.1e9, 111.9e9), 3.5e9, 4 / 3.5, isa="avx2+fma", lanes=8)
#: This project's AMD EPYC VM (family 26 model 2, Zen 5), measured 2026-11-27: 258.5 GFLOP/s per core, scalar
#: add chain 4.03 GHz, FMA chain 0.973 ns.
ZEN5 = _rates("AuthenticAMD", 26, 2, (258.5e9, 258.4e9), 4.03e9, 0.973)


def _peak(rates: ProbeRates, cores: int = 2) -> dict:
    return peaks.cpu_theoretical(cores, AVX512, derive(rates, threads=cores, seconds=0.3))


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch):
    for name in peaks.OVERRIDES:
        monkeypatch.delenv(name, raising=False)


def test_the_latency_table_knows_the_three_cpus_and_says_when_it_does_not():
    assert fma_latency("GenuineIntel", 6, 85, "avx512f") == (4, "Intel Skylake-SP/Cascade Lake/Cooper Lake")
    assert fma_latency("GenuineIntel", 6, 143, "avx512f")[0] == 4
    assert fma_latency("AuthenticAMD", 25, 17, "avx512f") == (4, "AMD Zen 4")
    assert fma_latency("AuthenticAMD", 25, 1, "avx2+fma") == (4, "AMD Zen 3")
    assert fma_latency("AuthenticAMD", 23, 49, "avx2+fma") == (5, "AMD Zen/Zen+/Zen 2")
    assert fma_latency("GenuineIntel", 6, 0x3F, "avx2+fma") == (5, "Intel Haswell")
    cycles, why = fma_latency("GenuineIntel", 6, 0x97, "avx2+fma")  # Alder Lake: P- and E-cores differ
    assert cycles is None and "not in the table" in why and "family 6 model 151" in why
    assert fma_latency("GenuineIntel", 6, 85, "avx")[0] is None  # a multiply then an add: no FMA latency


def test_cascade_lake_peak_is_the_fma_throughput_not_the_add_chain_upper_bound():
    found = derive(CASCADE, threads=2, seconds=0.3)
    assert found.measured and found.fma_latency_cycles == 4
    assert found.vector_clock_ghz == pytest.approx(4 / 1.5, rel=1e-6) and found.scalar_clock_ghz == 3.08
    assert found.fma_units_ratio == pytest.approx(151.95 / (4 / 1.5 * 32), rel=1e-6)  # 1.78: not a whole number
    assert found.fma_units == 2 and found.fma_units_source.startswith("assumed 2: the nearest whole number to 1.78")
    assert found.clock_ghz == pytest.approx(151.95 / 64, rel=1e-6)  # the loop's own: the AVX-512 licence clock
    theo = _peak(CASCADE)
    assert theo["fp32_flops_per_s"] == pytest.approx(2 * 151.95e9, rel=1e-9)
    assert abs(theo["fp32_flops_per_s"] / 305e9 - 1) < 0.05  # the acceptance: within 5% of ~305
    assert theo["fp32_flops_per_s"] < 2 * 3.08e9 * 64  # never ceil(ratio) units at the add-chain clock (394)
    assert theo["fp32_source"] == "measured"  # the peak is the loop's throughput; its clock assumed the units
    assert not theo["clock_measured"] and theo["clock_source"].startswith("derived: 2.37 GHz, the FMA loop's own at "
                                                                          "an assumed 2 units")
    # The label says what was measured and what was assumed, wherever the figure is shown.
    assert "assumed 2" in theo["fma_units_source"] and "assumed 2" in theo["assumptions"]
    assert theo["fp32_basis"].startswith("measured: 2 cores x 151.9 GFLOP/s per core, the AVX-512 FMA loop's")
    assert "scalar add-chain clock 3.08 GHz (not used for vector work)" in theo["clock_source"]
    assert "measured by the FMA probe" not in theo["assumptions"]


def test_sapphire_rapids_has_two_measured_units_at_its_vector_clock():
    found = derive(SAPPHIRE, threads=2, seconds=0.3)
    assert found.fma_units == 2 and found.fma_units_source.startswith("measured: 1.9")
    assert found.clock_ghz == pytest.approx(216e9 / 64 / 1e9, rel=1e-6) and 3.3 < found.clock_ghz < 3.45
    theo = _peak(SAPPHIRE)
    assert theo["fp32_flops_per_s"] == pytest.approx(432e9, rel=1e-9)
    assert theo["clock_measured"] and theo["clock_source"].startswith("measured: 3.38 GHz, the FMA loop's own")
    assert theo["bf16_flops_per_s"] is None  # AMX is not in AVX512's flags here: no BF16 rate derived
    amx = peaks.cpu_theoretical(2, [*AVX512, "amx_bf16"], derive(SAPPHIRE, threads=2, seconds=0.3))
    assert amx["bf16_flops_per_s"] == pytest.approx(2 * found.clock_ghz * 1e9 * 1024, rel=1e-9)
    assert amx["dtype_peaks_source"]["bf16"].startswith("derived (not measured)")


def test_zen4_runs_avx512_on_two_256_bit_pipes_one_512_bit_unit():
    found = derive(ZEN4, threads=2, seconds=0.3)
    assert found.fma_units == 1 and found.fma_units_source.startswith("measured: 1.00")
    assert found.clock_ghz == pytest.approx(118.2 / 32, rel=1e-6)  # 32 FP32 FLOP/cycle per core
    theo = _peak(ZEN4)
    assert theo["fp32_flops_per_cycle_per_core"] == 32 and theo["fp32_flops_per_s"] == pytest.approx(236.4e9)


def test_zen3_has_two_units_measured_at_its_own_clock():
    found = derive(ZEN3, threads=2, seconds=0.3)
    assert found.fma_latency_cycles == 4 and found.vector_clock_ghz == pytest.approx(3.5, rel=1e-6)
    assert found.fma_units == 2 and found.fma_units_source.startswith("measured: 2.00")  # not 1.6 at 5 cycles
    theo = peaks.cpu_theoretical(2, ["avx2", "fma"], found)
    assert theo["clock_measured"] and theo["fp32_flops_per_cycle_per_core"] == 32


def test_zen5_here_has_two_full_width_units():
    found = derive(ZEN5, threads=2, seconds=0.3)
    assert found.fma_units == 2 and found.fma_latency_cycles == 4
    assert found.vector_clock_ghz == pytest.approx(4 / 0.973, rel=1e-6)
    assert abs(found.clock_ghz / found.vector_clock_ghz - 1) < 0.05 and abs(found.clock_ghz / 4.03 - 1) < 0.05


def test_an_unknown_latency_derives_no_clock_and_never_uses_the_scalar_clock():
    alder = _rates("GenuineIntel", 6, 0x97, (120e9, 121e9), 4.5e9, 1.0, isa="avx2+fma", lanes=8)
    found = derive(alder, threads=2, seconds=0.3)
    assert found.measured and found.fma_units is None and found.clock_ghz is None and found.vector_clock_ghz is None
    assert "not in the table" in found.vector_clock_source and "scalar clock is not used" in found.vector_clock_source
    theo = peaks.cpu_theoretical(2, ["avx2", "fma"], found)
    assert theo["fp32_flops_per_s"] == pytest.approx(241e9) and theo["fp32_source"] == "measured"
    assert theo["fma_units_per_core"] is None and not theo["clock_measured"]
    assert theo["bf16_flops_per_s"] is None and "no FMA units per core known" in theo["dtype_peaks_source"]["fp64"]
    assert theo["clock_source"].startswith("not determined under FMA load")


def test_a_busy_probe_says_so_and_an_empty_one_is_not_used():
    busy = derive(_rates("AuthenticAMD", 26, 2, (250e9, 255e9), 4.0e9, 1.0, share=0.5), threads=2, seconds=0.3)
    assert busy.busy and "busy machine: a probe thread ran 50% of the wall time" in busy.method
    assert busy.fma_spread_rel == pytest.approx(5e9 / 252.5e9)
    empty = derive(_rates("AuthenticAMD", 26, 2, (0.0, 0.0), 4.0e9, 1.0), threads=2, seconds=0.3)
    assert not empty.measured and "no work" in empty.method
    silly = derive(_rates("AuthenticAMD", 26, 2, (250e9,), 4.0e9, 0.01), threads=1, seconds=0.3)  # 400 GHz
    assert silly.measured and silly.fma_units is None and silly.vector_clock_source.startswith("implausible")


def test_an_override_of_the_units_uses_the_vector_clock_and_says_so(monkeypatch):
    monkeypatch.setenv("DLPERF_CPU_FMA_UNITS", "1")
    theo = _peak(CASCADE)
    assert theo["fp32_source"] == "DLPERF_CPU_FMA_UNITS" and theo["fma_units_per_core"] == 1
    assert theo["fp32_flops_per_s"] == pytest.approx(2 * (4 / 1.5) * 1e9 * 1 * 16 * 2)
    assert theo["clock_source"].startswith("measured: vector clock 2.67 GHz")


def test_a_clock_at_assumed_units_is_shown_as_derived_everywhere(monkeypatch):
    """`hw show` and this machine's catalog entry: Cascade Lake's 2.37 GHz (the FMA loop's rate at an assumed 2
    units) is `derived`, once, never `measured`."""
    from dlperf.hardware import peak_cache, probe
    from dlperf.hardware.detect import detect_cpu

    monkeypatch.setattr(peak_cache, "sustained", lambda: derive(CASCADE, threads=2, seconds=0.3))
    monkeypatch.setattr(probe, "cpu_model", lambda: "Intel(R) Xeon(R) CPU @ 2.80GHz")
    monkeypatch.setattr(probe, "physical_cores", lambda: 2)
    monkeypatch.setattr(probe, "cpu_flags", lambda: AVX512)
    dev, _ = detect_cpu()
    assert dev.peak_clock == "derived" and dev.value("peak_clock_mhz") == pytest.approx(151.95e3 / 64, rel=1e-6)
    line = peaks.clock_line(peaks.cpu_peaks())
    assert line.startswith("CPU clock for the peaks: derived: 2.37 GHz, the FMA loop's own at an assumed 2 units")
    assert line.count("2.37 GHz") == 1


def test_one_core_alone_is_recorded_beside_the_all_core_peak():
    """The probe's one-thread run is stored as a ratio to the all-core rate per core (the roofline's share of fewer
    cores uses it); the FP32 peak stays the all-core figure. A bare-metal Cascade Lake-class core at 1.2x alone
    (turbo); no ratio where the one-thread run did not happen."""
    from dataclasses import replace

    base = derive(CASCADE, threads=2, seconds=0.3)
    turbo = replace(base, one_thread_fma_flops_per_s=1.2 * base.fma_flops_per_s_per_core)
    theo = peaks.cpu_theoretical(2, AVX512, turbo)
    assert theo["one_core_fma_speedup"] == pytest.approx(1.2)
    assert theo["fp32_flops_per_s"] == pytest.approx(2 * base.fma_flops_per_s_per_core)
    assert f"one thread alone {1.2 * base.fma_flops_per_s_per_core / 1e9:.1f} GFLOP/s (1.20x)" in theo["fp32_basis"]
    assert "one_core_fma_speedup" not in peaks.cpu_theoretical(2, AVX512, base)
    tried = replace(turbo, tries_one_thread_fma_flops_per_s=(0.0, 1.1 * base.fma_flops_per_s_per_core,
                                                               1.2 * base.fma_flops_per_s_per_core))
    spread = f"{1.1 * base.fma_flops_per_s_per_core / 1e9:.1f}-{1.2 * base.fma_flops_per_s_per_core / 1e9:.1f}"
    assert f"(1.20x, {spread} over 2 probes)" in peaks.cpu_theoretical(2, AVX512, tried)["fp32_basis"]  # 0.0: none ran
    assert base.one_core_speedup is None
