"""Hardware counters: ncu's CSV parsed into the study's nvprof metrics; a clear error without ncu."""

from __future__ import annotations

import pytest

from dlperf.core.jobs import CaseSpec
from dlperf.core.settings import RunSettings
from dlperf.profiling import ncu
from dlperf.runner import counters
from tests.conftest import run_cli

# The shape of `ncu --csv --page raw` output: log lines, a header, a units row, one row per kernel.
# Values are made up for the parser test; they are not a measurement.
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", *ncu.METRICS]
UNITS = ["", "", "", "", "", "", "", "inst", "inst", "inst", "%", "", "", "", "nsecond", "byte"]


def _row(i: int, name: str, fadd: float, fmul: float, ffma: float, eff: float, fetch: float, short: float,
         wait: float, ns: float, dram: float) -> list[str]:
    return [str(i), "4242", "python", "127.0.0.1", name, "1", "7",
            *(f"{v:,.0f}" if v >= 1000 else str(v) for v in (fadd, fmul, ffma, eff, fetch, short, wait, ns, dram))]


def _csv(rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return ",".join(f'"{c}"' for c in cells)

    return "\n".join(["==PROF== Connected to process 4242", line(HEADER), line(UNITS), *(line(r) for r in rows)])


def test_parse_and_summarise_per_call():
    rows = [_row(i, "ampere_sgemm_128x64_nn", 0, 0, 1_000_000, 80.0, 0.5, 1.0, 2.0, 3000, 3_000_000)
            for i in range(3)]  # 3 calls, one kernel each
    kernels = ncu.parse_csv(_csv(rows))
    assert len(kernels) == 3 and kernels[0]["kernel"] == "ampere_sgemm_128x64_nn"
    s = ncu.summarise(kernels, calls=3, analytic_flops=2_000_000, analytic_bytes=1_500_000)
    assert s["flop_count_sp"] == 2_000_000  # 2 x FFMA per call
    assert s["flops_counter_over_model"] == 1.0
    assert s["flop_sp_efficiency_pct"] == 80.0
    assert s["stall_inst_fetch"] == 0.5 and s["stall_exec_dependency"] == 3.0
    assert s["dram_bytes"] == 3_000_000 and s["dram_bytes_over_model"] == 2.0
    assert s["kernel_time_s"] == pytest.approx(3e-6) and s["kernel_launches_per_call"] == 1


def test_efficiency_is_time_weighted_across_kernels():
    rows = [_row(0, "a", 10, 0, 0, 10.0, 0, 0, 0, 1000, 0), _row(1, "b", 10, 0, 0, 40.0, 0, 0, 0, 3000, 0)]
    s = ncu.summarise(ncu.parse_csv(_csv(rows)), calls=1, analytic_flops=20, analytic_bytes=None)
    assert s["flop_sp_efficiency_pct"] == pytest.approx(32.5)  # (10*1 + 40*3) / 4
    assert s["flop_count_sp"] == 20 and s["kernels"] == ["a", "b"] and s["dram_bytes_over_model"] is None


def test_no_kernel_rows_is_an_error_not_zero():
    with pytest.raises(ncu.CountersUnavailable):
        ncu.parse_csv("==PROF== Disconnected from process 1\n")


def test_command_limits_profiling_to_the_nvtx_range(tmp_path):
    cmd = ncu.ncu_command("/opt/ncu", ["python", "-m", "dlperf.runner.worker", "spec.json"], tmp_path / "o.csv")
    assert cmd[:5] == ["/opt/ncu", "--csv", "--page", "raw", "--metrics"]
    assert "--nvtx-include" in cmd and f"{ncu.NVTX_RANGE}/" in cmd and cmd[-1] == "spec.json"
    assert all(m in cmd[5] for m in ncu.METRICS)


def test_cpu_cases_get_no_counters():
    case = CaseSpec(workload="ops", framework="numpy", device="cpu", params={"op": "add"})
    assert counters.collect(case, RunSettings()) == {"error": "hardware counters are collected for CUDA cases only"}


def test_counters_without_ncu_fail_in_one_line(tmp_path):
    res = run_cli("run", "smoke", "--quick", "--counters", db=tmp_path / "r.sqlite", env={"DLPERF_NCU": "none"})
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dlperf: error: --counters needs Nsight Compute"), res.stderr
    assert not (tmp_path / "r.sqlite").exists()  # refused before any store is made, nor any case run


@pytest.mark.gpu
def test_counters_on_a_real_gpu(tmp_path):
    if ncu.find_ncu() is None:
        pytest.fail("a GPU is present but ncu is not: install Nsight Compute to run this test")
    from dlperf.runner.sweep import run_study
    from dlperf.store import Store
    from dlperf.studies import load_study

    study = tmp_path / "s.yaml"
    study.write_text("name: c\nworkload: ops\nframeworks: [torch]\ndevices: [cuda]\n"
                     "params: {op: dot, size_mb: 64}\nbudget_s: 0.5\n")  # one case: the quick step's 55 s
    store = Store(tmp_path / "r.sqlite")
    summary = run_study(load_study(str(study)), store, counters=True)
    results = store.results(summary.run_id)
    assert [r.status for r in results] == ["ok"]
    for r in results:
        c = r.m.counters
        assert "error" not in c, c
        assert c["flop_count_sp"] > 0 and 0.5 < c["flops_counter_over_model"] < 2.0
