"""Theoretical peaks against vendors' datasheet figures; the peaks workload's counts; `dlperf peaks`."""

from __future__ import annotations

import pytest

from dlperf.errors import ConfigError
from dlperf.hardware.peaks import cpu_theoretical, flop_peak, gpu_theoretical
from dlperf.workloads import get_workload
from tests.conftest import run_cli, torch_counted_flops


def test_cpu_peak_model_and_overrides(monkeypatch):
    monkeypatch.setenv("DLPERF_CPU_CLOCK_GHZ", "3.0")
    avx512 = cpu_theoretical(2, ["avx2", "fma", "avx512f"])
    assert avx512["fp32_flops_per_s"] == 2 * 3.0e9 * 2 * 16 * 2  # cores x clock x FMA units x lanes x 2
    assert "2 FMA units" in avx512["assumptions"] and avx512["clock_source"] == "DLPERF_CPU_CLOCK_GHZ"
    assert cpu_theoretical(4, ["avx2", "fma"])["fp32_flops_per_s"] == 4 * 3.0e9 * 2 * 8 * 2
    assert cpu_theoretical(1, ["sse2"])["fp32_flops_per_s"] == 3.0e9 * 2 * 4 * 1  # no FMA: 1 FLOP per lane
    monkeypatch.setenv("DLPERF_CPU_FMA_UNITS", "1")
    assert cpu_theoretical(2, ["avx512f"])["fp32_flops_per_s"] == 2 * 3.0e9 * 1 * 16 * 2
    assert cpu_theoretical(2, ["avx512f", "avx512_bf16"])["bf16_flops_per_s"] == 2 * 2 * 3.0e9 * 16 * 2
    monkeypatch.setenv("DLPERF_CPU_PEAK_FP32_GFLOPS", "500")
    assert cpu_theoretical(2, ["avx512f"])["fp32_flops_per_s"] == 500e9


def test_cpu_bandwidth_is_unknown_unless_given(monkeypatch):
    monkeypatch.delenv("DLPERF_MEM_BW_GBS", raising=False)
    peaks = cpu_theoretical(2, ["avx2"])
    assert peaks["mem_bw_bytes_per_s"] is None and "DLPERF_MEM_BW_GBS" in peaks["mem_bw_source"]
    monkeypatch.setenv("DLPERF_MEM_BW_GBS", "51.2")
    assert cpu_theoretical(2, ["avx2"])["mem_bw_bytes_per_s"] == 51.2e9


def test_bad_override_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("DLPERF_CPU_CLOCK_GHZ", "fast")
    with pytest.raises(ConfigError, match="DLPERF_CPU_CLOCK_GHZ='fast' is not a number"):
        cpu_theoretical(2, ["avx2"])


def test_gpu_model_reproduces_datasheets():
    # H100 SXM5: 132 SMs, 1980 MHz max SM clock, HBM3 2619 MHz on a 5120-bit bus.
    h100 = gpu_theoretical(major=9, minor=0, sm_count=132, sm_clock_mhz=1980, mem_clock_mhz=2619,
                           bus_width_bits=5120)
    assert h100["fp32_flops_per_s"] == pytest.approx(66.9e12, rel=0.01)  # NVIDIA: 67 TFLOPS FP32
    assert h100["mem_bw_bytes_per_s"] == pytest.approx(3.35e12, rel=0.01)  # NVIDIA: 3.35 TB/s
    # A100 40 GB: 108 SMs, 1410 MHz, HBM2 1215 MHz on 5120 bits.
    a100 = gpu_theoretical(major=8, minor=0, sm_count=108, sm_clock_mhz=1410, mem_clock_mhz=1215,
                           bus_width_bits=5120)
    assert a100["fp32_flops_per_s"] == pytest.approx(19.5e12, rel=0.01)  # NVIDIA: 19.5 TFLOPS
    assert a100["fp16_flops_per_s"] == pytest.approx(312e12, rel=0.01)  # NVIDIA: 312 TFLOPS dense
    assert a100["mem_bw_bytes_per_s"] == pytest.approx(1.555e12, rel=0.01)  # NVIDIA: 1,555 GB/s
    assert flop_peak(a100, "bfloat16") == a100["fp16_flops_per_s"]
    # GTX 980 (study 002): 16 SMs, 1216 MHz boost -> about 5 TFLOPS FP32.
    gtx980 = gpu_theoretical(major=5, minor=2, sm_count=16, sm_clock_mhz=1216, mem_clock_mhz=None,
                             bus_width_bits=None)
    assert gtx980["fp32_flops_per_s"] == pytest.approx(4.98e12, rel=0.01)
    assert gtx980["fp16_flops_per_s"] is None and gtx980["mem_bw_bytes_per_s"] is None


def test_unknown_architecture_has_no_invented_peak():
    out = gpu_theoretical(major=12, minor=0, sm_count=100, sm_clock_mhz=2000, mem_clock_mhz=None,
                          bus_width_bits=None)
    assert out["fp32_flops_per_s"] is None and out["architecture"] == "unknown"


def test_peaks_workload_counts_and_flop_counter():
    from dlperf.frameworks import get_framework

    w = get_workload("peaks")
    gemm = w.parse({"kind": "gemm", "size_mb": 12})
    assert torch_counted_flops(w.build(get_framework("torch"), "cpu", gemm).fn) == w.cost(gemm).flops
    copy = w.cost(w.parse({"kind": "copy", "size_mb": 8}))
    assert copy.flops == 0 and copy.bytes_moved == 8 * 2**20
    triad = w.cost(w.parse({"kind": "triad", "size_mb": 12}))
    assert triad.bytes_moved == 12 * 2**20 and triad.flops == 2 * (12 * 2**20 // 12)


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax", "tensorflow"])
def test_copy_and_triad_really_move_the_data(framework):
    """A copy that returns in no time was aliased, not copied (TensorFlow's identity did that)."""
    import time

    from dlperf.frameworks import get_framework

    w = get_workload("peaks")
    fw = get_framework(framework)
    for kind in ("copy", "triad"):
        p = w.parse({"kind": kind, "size_mb": 256})
        step = w.build(fw, "cpu", p)
        fn, sync = fw.prepare(step.fn, "cpu")
        fn()
        sync()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        sync()
        per_call = (time.perf_counter() - t0) / 3
        # 256 MiB at 500 GB/s would take 0.5 ms; no machine of this kind gets near that.
        assert w.cost(p).bytes_moved / per_call < 500e9, (framework, kind)


def test_dlperf_peaks_prints_theoretical_and_measured(tmp_path):
    res = run_cli("peaks", "--quick", "--framework", "numpy", db=tmp_path / "r.sqlite")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "theoretical FP32 GFLOP/s" in out and "GEMM GFLOP/s" in out and "copy GB/s" in out and "triad GB/s" in out
    row = next(line for line in out.splitlines() if "numpy" in line and "│" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert float(cells[3]) > 1 and float(cells[6]) > 0.5 and float(cells[7]) > 0.5  # GEMM, copy, triad measured
    assert "CPU theoretical peak:" in out


def test_a_gemm_above_the_peak_is_said_never_shown_as_a_plain_share():
    from dlperf.report.peaks_table import _share

    assert _share(238e9, 304e9) == "78%" and _share(None, 304e9) == "-" and _share(238e9, None) == "-"
    assert _share(372e9, 332.8e9) == "112% (above the peak: the peak is too low)"
