"""The environment fingerprint: content, identity hash (identity only), diff; host probing reads /proc/cpuinfo
once; compare never merges environments silently."""

from __future__ import annotations

from datetime import UTC, datetime

import psutil
import pytest

from dlperf.core.result import CaseResult
from dlperf.hardware import probe
from dlperf.hardware.identity import (
    GPU_IDENTITY_KEYS,
    IDENTITY_KEYS,
    derived,
    diff,
    fingerprint,
    host_fingerprint,
    identity,
    identity_hash,
)
from dlperf.store import Store
from tests.conftest import run_cli


def test_host_fingerprint_has_the_identity_fields():
    fp = host_fingerprint(threads=2)
    for key in ("cpu_model", "cpu_physical_cores", "cpu_logical_cores", "threads", "ram_bytes", "os", "kernel",
                "python", "hostname_sha256", "gpus", "dlperf_version", "dlperf_git_commit"):
        assert key in fp
    assert fp["threads"] == 2
    assert fp["cpu_logical_cores"] == psutil.cpu_count()
    assert fp["ram_bytes"] == psutil.virtual_memory().total
    import socket

    assert socket.gethostname() not in str(fp)  # only the hash of the host name is kept


def test_framework_part_names_versions_and_blas():
    fp = fingerprint(["numpy", "torch"], threads=1)
    assert set(fp["frameworks"]) == {"numpy", "torch"}
    assert fp["frameworks"]["torch"]["version"].startswith("2.")
    assert fp["frameworks"]["numpy"].get("blas")


def test_hash_is_stable_and_sensitive():
    a = {"cpu_model": "x", "threads": 2, "frameworks": {"torch": {"version": "2.13.0"}}}
    assert identity_hash(a) == identity_hash(dict(reversed(list(a.items()))))
    b = {**a, "frameworks": {"torch": {"version": "2.14.0"}}}
    assert identity_hash(a) != identity_hash(b)
    assert diff(a, b) == [("frameworks.torch.version", "2.13.0", "2.14.0")]


def test_compare_across_environments_says_so(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    now = datetime.now(UTC)
    run_ids = []
    for threads in (1, 2):
        fp = {"cpu_model": "x", "threads": threads}
        env_id = store.environment_id(fp, identity_hash(fp))
        run_id = store.create_run(study=f"s{threads}", variant="full", study_hash="h", study_path="p", filters={},
                                  settings={}, env_id=env_id, n_cases=1, dlperf_version="0")
        store.add_result(CaseResult.from_row({
            "run_id": run_id, "case_key": "k", "repetition": 0, "workload": "ops", "framework": "numpy",
            "device": "cpu", "params": {}, "status": "ok", "reason": None,
            "measurement": {"sample_times_s": [1e-3 * (1 + i / 100) for i in range(10)], "sample_iters": [1] * 10},
            "metrics": {}, "env_id": env_id, "wall_s": 1.0, "started_at": now, "finished_at": now}))
        run_ids.append(run_id)
    res = run_cli("compare", *run_ids, db=db)
    assert res.returncode == 0, res.stderr
    assert "the two runs come from different environments" in res.stdout
    assert "threads: 1 -> 2" in res.stdout


def _with_a_gpu(fp):
    gpu = {"index": 0, "name": "NVIDIA L4", "memory_bytes": 24 * 2**30, "driver": "550.54", "cuda_driver": "12.4",
           "peaks_theoretical": {"fp32_flops_per_s": 3.0e13, "peaks_source": "catalog entry l4"}}
    return {**fp, "gpus": [gpu], "gpu_source": "nvml"}


def test_identity_hash_ignores_derived_data():
    """Peaks (CPU's and GPUs'), the overrides in force, how GPUs were read, dlperf's version and commit are
    recorded, not hashed: none of them changes the environment."""
    fp = _with_a_gpu({**host_fingerprint(threads=2), "frameworks": {"numpy": {"version": "2.2.0", "blas": "x"}}})
    base = identity_hash(fp)
    gpu = fp["gpus"][0]
    for changed in (
        {"cpu_peaks_theoretical": {**fp["cpu_peaks_theoretical"], "mem_bw_bytes_per_s": 50e9}},
        {"peaks_overrides": {"DLPERF_MEM_BW_GBS": "50"}},
        {"dlperf_git_commit": "f" * 40},
        {"dlperf_version": "9.9.9"},
        {"gpu_source": "nvidia-smi"},
        {"gpus": [{**gpu, "peaks_theoretical": {"fp32_flops_per_s": 1.0}}]},
    ):
        assert identity_hash({**fp, **changed}) == base, changed


def test_identity_hash_changes_with_the_machine_and_software():
    fp = _with_a_gpu({**host_fingerprint(threads=2), "frameworks": {"numpy": {"version": "2.2.0", "blas": "x"}}})
    base = identity_hash(fp)
    gpu = fp["gpus"][0]
    for changed in (
        {"threads": 1},
        {"frameworks": {"numpy": {"version": "2.3.0", "blas": "x"}}},
        {"frameworks": {"numpy": {"version": "2.2.0", "blas": "y"}}},
        {"cpu_model": "another CPU"},
        {"ram_bytes": fp["ram_bytes"] + 2**30},
        {"gpus": [{**gpu, "driver": "555.1"}]},
        {"gpus": []},
        {"machine_label": "bench-1"},
    ):
        assert identity_hash({**fp, **changed}) != base, changed


def test_a_machine_label_is_identity_only_where_set(monkeypatch):
    monkeypatch.delenv("DLPERF_MACHINE_LABEL", raising=False)
    assert "machine_label" not in host_fingerprint(1)  # unlabelled machines keep the environments they had
    monkeypatch.setenv("DLPERF_MACHINE_LABEL", " bench-1 ")
    fp = host_fingerprint(1)
    assert fp["machine_label"] == "bench-1" and identity(fp)["machine_label"] == "bench-1"


def test_identity_and_derived_split_a_fingerprint():
    fp = _with_a_gpu(fingerprint(["numpy"], threads=1))
    ident, rest = identity(fp), derived(fp)
    # every identity key but the machine label, which is there only where DLPERF_MACHINE_LABEL is set
    assert set(ident) == set(IDENTITY_KEYS) - {"machine_label"} and set(ident["gpus"][0]) == set(GPU_IDENTITY_KEYS)
    assert {"cpu_peaks_theoretical", "peaks_overrides", "dlperf_version", "dlperf_git_commit"} <= set(rest)
    assert not set(rest) & (set(IDENTITY_KEYS) - {"gpus"})
    assert {**ident, **rest} == fp  # laid over the environment, a run's derived data gives its fingerprint back


def test_the_peaks_overrides_in_force_are_recorded(monkeypatch):
    monkeypatch.setenv("DLPERF_MEM_BW_GBS", "50")
    monkeypatch.delenv("DLPERF_CPU_CLOCK_GHZ", raising=False)
    fp = host_fingerprint(threads=2)
    assert fp["peaks_overrides"] == {"DLPERF_MEM_BW_GBS": "50"}
    assert fp["cpu_peaks_theoretical"]["mem_bw_source"] == "DLPERF_MEM_BW_GBS"


def test_the_migration_hashes_as_the_identity_does():
    """Schema step v1 -> v2 keeps its own frozen copy of the identity; while IDENTITY_KEYS stay as they were
    then, a re-keyed environment and a new fingerprint of the same machine meet. If this fails,
    IDENTITY_KEYS changed: add a migration step that re-keys the environments. The machine label came later and
    needs none: it is in a fingerprint only where DLPERF_MACHINE_LABEL is set, which no v1 fingerprint was."""
    from dlperf.store import migrations

    assert migrations._V2_IDENTITY_KEYS == tuple(k for k in IDENTITY_KEYS if k != "machine_label")
    assert migrations._V2_GPU_IDENTITY_KEYS == GPU_IDENTITY_KEYS
    fp = _with_a_gpu(fingerprint(["numpy"], threads=1))
    assert migrations.v2_identity_hash(fp) == identity_hash(fp)
    assert migrations.v2_derived(fp) == derived(fp)


class _CountingFile:
    """Stands for /proc/cpuinfo and counts its reads."""

    TEXT = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\ncpu MHz\t\t: 2000.000\n"
            "flags\t\t: fpu sse avx avx2 fma avx512f\n\nprocessor\t: 1\ncpu MHz\t\t: 2100.000\n")

    def __init__(self) -> None:
        self.reads = 0

    def read_text(self) -> str:
        self.reads += 1
        return self.TEXT


@pytest.fixture
def fake_cpuinfo(monkeypatch):
    fake = _CountingFile()
    monkeypatch.setattr(probe, "CPUINFO", fake)
    probe.cpuinfo_lines.cache_clear()
    yield fake
    probe.cpuinfo_lines.cache_clear()  # the next reader sees the real file again


def test_cpuinfo_is_read_once(fake_cpuinfo, monkeypatch):
    from dlperf.hardware.detect import detect_cpu, this_cpu
    from dlperf.hardware.peaks import nominal_clock_ghz

    monkeypatch.delenv("DLPERF_CPU_CLOCK_GHZ", raising=False)
    fp = host_fingerprint(threads=2)
    detect_cpu(), this_cpu(), nominal_clock_ghz()
    assert fake_cpuinfo.reads == 1
    assert fp["cpu_model"] == "Intel(R) Xeon(R) Platinum 8480+" and fp["cpu_flags"] == ["avx", "avx2", "fma", "avx512f"]
    assert probe.cpu_mhz() == [2000.0, 2100.0]


def _fake_nvml():
    """NVML as it answers for an H100 and a GPU the catalog lacks whose bus width it does not report."""
    from types import SimpleNamespace as NS

    def bus_width(handle):
        if handle == 1:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 5120

    return NS(NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
              nvmlSystemGetDriverVersion=lambda: b"550.54.15", nvmlSystemGetCudaDriverVersion_v2=lambda: 12040,
              nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
              nvmlDeviceGetName=lambda h: ["NVIDIA H100 80GB HBM3", "NVIDIA Mystery GPU"][h],
              nvmlDeviceGetMemoryInfo=lambda h: NS(total=80 * 2**30),
              nvmlDeviceGetCudaComputeCapability=lambda h: [(9, 0), (8, 9)][h],
              nvmlDeviceGetAttributes_v2=lambda h: NS(multiprocessorCount=[132, 60][h]),
              nvmlDeviceGetMaxClockInfo=lambda h, which: 1980 if which == 1 else 2619,
              nvmlDeviceGetMemoryBusWidth=bus_width)


def test_gpus_read_through_nvml(monkeypatch):
    """Probe reads NVML's facts; the fingerprint's GPU records carry their peaks (the catalog's for a GPU it
    knows, derived from NVML's properties otherwise), which stay out of the identity."""
    import sys

    from dlperf.hardware.catalog import find
    from dlperf.hardware.detect import detect_gpus

    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    raw, source = probe.nvidia_gpus()
    assert source == "nvml" and raw[1]["properties"] == {"compute_capability": [8, 9], "sm_count": 60,
                                                         "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
                                                         "bus_width_bits": None}
    fp = host_fingerprint(threads=2)
    h100, mystery = fp["gpus"]
    assert set(h100) == {*GPU_IDENTITY_KEYS, "peaks_theoretical"} and h100["cuda_driver"] == "12.4"
    assert h100["peaks_theoretical"]["fp32_flops_per_s"] == find("h100-sxm").value("peak_fp32_tflops") * 1e12
    assert mystery["peaks_theoretical"]["fp32_flops_per_s"] == 60 * 128 * 2 * 1980e6  # Ada: SMs x lanes x FMA x clock
    assert mystery["peaks_theoretical"]["mem_bw_bytes_per_s"] is None  # NVML did not give the bus width
    assert identity(fp)["gpus"] == [{k: g[k] for k in GPU_IDENTITY_KEYS} for g in fp["gpus"]]
    found = detect_gpus()
    assert found[0][0].id == "h100-sxm" and found[1][0].id == "this-gpu-1" and found[1][0].detected
    assert found[1][0].value("peak_fp32_tflops") == pytest.approx(60 * 128 * 2 * 1980e6 / 1e12)
