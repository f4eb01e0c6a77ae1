"""Issue 7: the training-memory model, measured efficiency from stored results, and `dlperf recommend`."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

import pytest

from dlperf.core.result import CaseResult
from dlperf.hardware import recommend as R
from dlperf.hardware.catalog import find
from dlperf.models import get_spec
from dlperf.models.memory import train_memory, train_traffic_bytes
from dlperf.models.spec import param_count, train_flops
from dlperf.store import Store
from tests.conftest import STUDIES, run_cli

STUDY = STUDIES / "cnn_recommend.yaml"


def _torch_saved_bytes(model: str, batch: int, image_size: int) -> int:
    """Bytes of the distinct non-parameter tensors PyTorch's autograd keeps for the backward pass."""
    import torch

    from dlperf.models import build

    net = build(model, "torch", 1000, image_size)
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net(torch.randn(batch, 3, image_size, image_size))
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in params)


@pytest.mark.parametrize("model,image_size", [("alexnet", 112), ("googlenet", 112), ("alexnet", 227)])
def test_activation_memory_matches_what_torch_autograd_saves(model, image_size):
    """The model's saved activations (plus the input) against PyTorch's own saved tensors, an independent
    counter: within 6%."""
    est = train_memory(get_spec(model), 4, image_size)
    saved = _torch_saved_bytes(model, 4, image_size)
    ours = est.activations_bytes + est.input_bytes - 4 * 8  # the labels are not saved by the forward
    assert ours == pytest.approx(saved, rel=0.06)


def test_memory_parts():
    spec = get_spec("alexnet")
    dev = train_memory(spec, 32)
    host = train_memory(spec, 32, where="host")
    n = param_count(spec)
    assert dev.params_bytes == dev.grads_bytes == dev.optimizer_bytes == 4 * n
    assert host.activations_bytes == dev.activations_bytes and host.activation_grads_bytes > dev.activation_grads_bytes
    assert dev.total_bytes == sum(v for k, v in dev.to_dict().items() if k.endswith("_bytes") and k != "total_bytes")
    amp = train_memory(spec, 32, precision="amp")
    assert amp.params_bytes == dev.params_bytes and amp.activations_bytes < dev.activations_bytes
    # activations grow linearly with the batch; parameters do not
    assert train_memory(spec, 64).activations_bytes == 2 * dev.activations_bytes
    assert train_memory(spec, 64).params_bytes == dev.params_bytes
    assert train_traffic_bytes(spec, 32) > 8 * dev.params_bytes
    for bad in ({"where": "disk"}, {"precision": "int4"}):
        with pytest.raises(ValueError):
            train_memory(spec, 1, **bad)
    with pytest.raises(ValueError):
        train_memory(spec, 0)


def test_roofline_binds_the_slower_ceiling():
    assert R.roofline_step_s(1e12, 1e9, 1e12, 1e12) == (1.0, "compute")
    assert R.roofline_step_s(1e12, 4e12, 1e12, 1e12) == (4.0, "memory")
    assert R.roofline_step_s(1e12, 4e12, 1e12, None) == (1.0, "compute (bandwidth unknown)")


def _row(batch: int, ips: float, *, model: str = "alexnet", size: int = 112, kind: str = "cpu",
         framework: str = "torch", peak: float = 1e12) -> dict:
    return {"device": "test-cpu", "device_name": "Test CPU", "kind": kind, "entry": None,
            "peaks": {"fp32_flops_per_s": peak, "mem_bw_bytes_per_s": None}, "bw_bytes_per_s": None,
            "framework": framework, "model": model, "image_size": size, "batch": batch, "precision": "fp32",
            "images_per_s": ips, "peak_rss_bytes": None, "baseline_rss_bytes": None, "peak_device_mem_bytes": None}


def _eff(batch: int, ips: float) -> float:
    """What the efficiency of a row should be: images/s over the compute roof (no bandwidth known)."""
    return ips / (1e12 / (train_flops(get_spec("alexnet"), batch, 112) / batch))


def test_efficiency_is_interpolated_in_log_batch():
    rows = [_row(2, 10.0), _row(32, 80.0)]
    e2, e32 = _eff(2, 10.0), _eff(32, 80.0)
    assert R.interpolated_efficiency(rows, 8, 112) == pytest.approx(e2 + 0.5 * (e32 - e2))
    assert R.interpolated_efficiency(rows, 128, 112) == pytest.approx(e32)  # beyond the range: the nearest
    assert R.interpolated_efficiency(rows, 1, 112) == pytest.approx(e2)
    assert R.interpolated_efficiency([], 8, 112) is None


def test_calibration_uses_the_same_kind_or_says_default():
    rows = [_row(2, 10.0), _row(32, 80.0), _row(32, 60.0, framework="tensorflow")]
    req = R.Request("alexnet", 32, 112)
    eff, source = R.calibration(rows, req, "cpu")
    assert eff == pytest.approx(_eff(32, 80.0)) and "measured: Test CPU torch" in source  # the better framework
    eff, source = R.calibration(rows, req, "gpu")
    assert eff == R.DEFAULT_EFFICIENCY and source.startswith("default")
    assert R.calibration(rows, R.Request("alexnet", 32, 112, efficiency=0.5), "gpu") == (0.5, "given (--efficiency)")


def test_estimate_follows_the_catalog():
    req = R.Request("alexnet", 128, 227)
    gtx = find("gtx-1070")
    est = R.estimate(gtx, req, 0.5, "given")
    spec = get_spec("alexnet")
    flops = train_flops(spec, 128, 227)
    step, binds = R.roofline_step_s(flops, train_traffic_bytes(spec, 128, 227), 6.463e12, 256e9)
    assert est["images_per_s"] == pytest.approx(128 / (step / 0.5)) and est["binds"] == binds
    assert est["fits"] is True and est["memory_bytes"] == train_memory(spec, 128, 227).total_bytes
    assert est["images_per_s_per_kusd"] == pytest.approx(1e3 * est["images_per_s"] / 379)
    huge = R.estimate(gtx, R.Request("alexnet", 4096, 227), 0.5, "given")
    assert huge["fits"] is False and "GB >" in R.exclusion(huge, req)


def test_rank_applies_budget_power_and_target():
    devices = [find(x) for x in ("gtx-1070", "rx-580", "rtx-4090", "jetson-nano", "ncs2", "h100-sxm")]
    ranked, excluded, key = R.rank(devices, [], R.Request("alexnet", 128, 227, budget_usd=1000))
    why = {e["device"].id: w for e, w in excluded}
    assert key == "throughput" and "rtx-4090" in why and "budget" in why["rtx-4090"]
    assert "price unknown" in why["h100-sxm"] and "no FP32 peak" in why["ncs2"]
    ips = [e["images_per_s"] for e in ranked]
    assert ips == sorted(ips, reverse=True) and [e["rank"] for e in ranked] == list(range(1, len(ranked) + 1))
    assert all(e["reason"] for e in ranked)

    ranked, excluded, key = R.rank(devices, [], R.Request("alexnet", 128, 227, max_power_w=20))
    assert [e["device"].id for e in ranked] == ["jetson-nano"]
    target = ranked[0]["images_per_s"] * 3
    ranked, excluded, key = R.rank(devices, [], R.Request("alexnet", 128, 227, target_ips=target))
    assert key == "price"  # with a target: the cheapest device that meets it first
    prices = [e["device"].value("launch_price_usd") or math.inf for e in ranked]
    assert prices == sorted(prices) and all(e["images_per_s"] >= target for e in ranked)


def test_parse_workload():
    assert R.parse_workload("cnn:alexnet") == ("cnn", "alexnet")
    for bad in ("alexnet", "mlp:alexnet", "cnn:resnet"):
        with pytest.raises(ValueError):
            R.parse_workload(bad)


@pytest.fixture(scope="module")
def measured_db(tmp_path_factory):
    """A real AlexNet run (torch, 112 px, batches 2 and 8) on this machine."""
    db = tmp_path_factory.mktemp("recommend") / "r.sqlite"
    res = run_cli("run", str(STUDY), db=db, timeout=400)
    assert res.returncode == 0, res.stderr
    return db


def test_recommend_end_to_end(measured_db, tmp_path):
    res = run_cli("recommend", "--workload", "cnn:alexnet", "--batch", "128", "--budget-usd", "1000",
                  "--plot-dir", str(tmp_path / "fig"), db=measured_db)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    png = tmp_path / "fig" / "alexnet-b128-227px-fp32.png"
    assert f"plot: {png}" in out and png.stat().st_size > 10_000
    assert "ESTIMATES for alexnet training, batch 128, 227 px" in out
    assert re.search(r"│ 1 │ \S+", out) and "left out:" in out and "rtx-4090 ($1,599 > budget $1,000)" in out
    # a catalog CPU's memory is its host's, unknown: not ranked unchecked (issue 14); the calibration on this
    # machine's measurements shows where its CPU is ranked (test_recommend_shows_this_machine_against_its_measurement)
    assert "efficiency from: " in out and "cannot check memory (so not ranked): " in out
    # the memory check: both measured batches, printed with their error, within 25% of the peak RSS
    errors = [int(m) for m in re.findall(r"MiB │\s+([+-]\d+)% │", out)]
    assert len(errors) == 2, out
    assert all(abs(e) <= 25 for e in errors), out
    assert "2 within 25%" in out


def test_recommend_shows_this_machine_against_its_measurement(measured_db):
    res = run_cli("recommend", "--workload", "cnn:alexnet", "--batch", "8", "--image-size", "112", "--kind", "cpu",
                  db=measured_db)
    assert res.returncode == 0, res.stderr
    # this machine's CPU (its catalog entry, or the entry derived here) carries its measurement at batch 8
    # and the leave-one-out estimate's error there
    assert re.search(r"│ \d+ │ \S+ +│ +cpu │.*img/s torch b8 112px \(est\. [+-]\d+%\)", res.stdout), res.stdout
    assert "efficiency from: measured: " in res.stdout  # the CPU estimates are calibrated on this machine


def test_recommend_json(measured_db):
    import json

    res = run_cli("recommend", "--workload", "cnn:alexnet", "--batch", "64", "--max-power-w", "200", "--format", "json",
                  db=measured_db)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["estimate"] is True and out["request"]["max_power_w"] == 200
    assert [r["rank"] for r in out["ranked"]] == list(range(1, len(out["ranked"]) + 1))
    assert all(r["device"]["tdp_w"] <= 200 for r in out["ranked"])
    assert any("TDP" in r["reason"] for r in out["left_out"])
    assert len(out["checks"]) == 2 and all(abs(c["memory_error"]) <= 0.25 for c in out["checks"])
    assert all(c["images_per_s_iqr_rel"] is not None for c in out["checks"])
    parts = out["ranked"][0]["estimate"]["memory_parts"]
    assert parts["total_bytes"] == out["ranked"][0]["estimate"]["memory_bytes"]


def test_hw_measured(measured_db):
    res = run_cli("hw", "measured", "--all-batches", "--tdp-w", "65", db=measured_db)
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if "alexnet" in line]
    assert len(rows) == 2 and all("65.0 (TDP)" in r for r in rows)
    assert "IQR" in res.stdout and all(re.search(r"│\s+\d+\.\d% │", r) for r in rows)  # each rate with its spread
    assert "TDP given by the user, not measured" in res.stdout and "real GFLOP/s" in res.stdout
    plain = run_cli("hw", "measured", db=measured_db)
    assert "no TDP known" in plain.stdout and len([ln for ln in plain.stdout.splitlines() if "alexnet" in ln]) == 1


@pytest.mark.parametrize("args,message", [
    (["recommend", "--workload", "mlp:x"], "--workload must be FAMILY:MODEL"),
    (["recommend", "--workload", "cnn:alexnet", "--image-size", "20"], "too small"),
    (["recommend", "--workload", "cnn:alexnet", "--budget-usd", "-5"], "--budget-usd"),
    (["hw", "measured"], "no cnn results stored"),
])
def test_bad_input_is_one_line(tmp_path, args, message):
    Store(tmp_path / "empty.sqlite")  # an empty store (read-only commands refuse one that does not exist)
    res = run_cli(*args, db=tmp_path / "empty.sqlite")
    assert res.returncode != 0 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_power_and_price_say_where_they_come_from():
    """Measured power wins; a TDP is used only as a labelled stand-in; with neither the figure stays empty."""
    from dlperf.hardware.measured import MeasuredDevice, _power, _price

    gtx = MeasuredDevice("gtx-1070", "NVIDIA GeForce GTX 1070", "gpu", find("gtx-1070"), {})
    unknown = MeasuredDevice("X (not in catalog)", "X", "cpu", None, {})
    metered = {"measured": True, "mean_power_w": 97.5, "meter": "nvml"}
    unmetered = {"measured": False, "reason": "no RAPL zones"}
    assert _power(metered, gtx, None) == (97.5, "measured (nvml)")
    watts, how = _power(unmetered, gtx, None)
    assert watts == 150 and how.startswith("TDP from the catalog, not measured") and "no RAPL zones" in how
    watts, how = _power(unmetered, unknown, 65.0)
    assert watts == 65.0 and how.startswith("TDP given by the user")
    watts, how = _power(unmetered, unknown, None)
    assert watts is None and "no TDP known" in how
    assert _price(gtx, 999.0) == (379, "catalog launch price")  # the catalog's figure, not the user's
    assert _price(unknown, 999.0)[0] == 999.0 and _price(unknown, None)[0] is None


def test_a_vm_slice_of_a_catalog_cpu_is_scaled_not_taken_whole(monkeypatch):
    """2 vCPUs of a 56-core Xeon: TDP, price and peak are 2/56 of the package's, labelled; the whole
    package stays a separate catalog candidate, and a bare-metal match adds no duplicate."""
    from dlperf.hardware import peak_cache, probe
    from dlperf.hardware.detect import this_cpu
    from dlperf.hardware.fma_peak import ClockProbe
    from dlperf.hardware.measured import _power, _price, device_of

    monkeypatch.setattr(probe, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8480+")
    monkeypatch.setattr(probe, "physical_cores", lambda: 2)
    monkeypatch.setattr(probe, "cpu_flags", lambda: ["avx512f", "fma"])
    mine = this_cpu()
    assert mine is not None and mine.detected and mine.id == "this-cpu"
    assert mine.value("tdp_w") == pytest.approx(350 * 2 / 56)
    assert mine.value("launch_price_usd") == pytest.approx(10710 * 2 / 56)
    assert mine.value("peak_fp32_tflops") and {"tdp_w", "launch_price_usd", "peak_fp32_tflops"} <= set(mine.derived)

    # Where the clock could not be measured (no C compiler), the catalog's figure is scaled to the slice;
    # a measured clock keeps its own figure (tests/hardware/test_clock_probe.py).
    monkeypatch.setattr(peak_cache, "sustained", lambda: ClockProbe(measured=False, method="no C compiler (test)",
                                                                     threads=2, seconds=0.0))
    monkeypatch.setattr(probe, "cpu_model", lambda: "AMD EPYC 9654 96-Core Processor")
    epyc = this_cpu()
    assert epyc.value("peak_fp32_tflops") == pytest.approx(find("epyc-9654").value("peak_fp32_tflops") * 2 / 96)
    monkeypatch.setattr(probe, "physical_cores", lambda: 96)
    assert this_cpu() is None  # the catalog entry describes this machine already
    assert find("epyc-9654").core_share(192) == 2.0 and find("gtx-1070").core_share(2) == 1.0  # two sockets; a GPU

    env = {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_physical_cores": 2, "cpu_peaks_theoretical": {}}
    dev = device_of("cpu", env)
    assert dev.entry is find("xeon-8480plus") and dev.share == pytest.approx(2 / 56) and "of it" in dev.key
    watts, how = _power({"measured": False, "reason": "VM"}, dev, None)
    assert watts == pytest.approx(12.5) and "x 0.0357" in how
    assert _price(dev, None)[0] == pytest.approx(10710 * 2 / 56)


def test_hw_show_adds_this_machines_share_of_a_catalog_cpu(monkeypatch):
    from click.testing import CliRunner

    from dlperf.cli import cli
    from dlperf.hardware import probe

    monkeypatch.setattr(probe, "cpu_model", lambda: "Intel(R) Xeon(R) Platinum 8480+")
    monkeypatch.setattr(probe, "physical_cores", lambda: 2)
    monkeypatch.setattr(probe, "cpu_flags", lambda: ["avx512f", "fma"])
    monkeypatch.setattr(probe, "nvidia_gpus", lambda: ([], "no NVIDIA driver"))
    res = CliRunner().invoke(cli, ["hw", "show"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # the console may fold long lines
    assert "catalog match for 'Intel(R) Xeon(R) Platinum 8480+'" in out
    assert "as this machine sees it" in out and "2 of the 56 cores of catalog entry xeon-8480plus" in out
    assert "GPUs: none found" in out


def test_a_measured_gpu_is_found_by_its_cuda_index():
    """`hw measured` names a GPU result's device from the stored environment's GPU of that index."""
    from dlperf.hardware.measured import device_of

    env = {"gpus": [{"index": 0, "name": "NVIDIA L4", "peaks_theoretical": {"fp32_flops_per_s": 3.0e13}},
                    {"index": 1, "name": "NVIDIA H100 80GB HBM3", "peaks_theoretical": {"fp32_flops_per_s": 6.7e13}}]}
    first, second = device_of("cuda", env), device_of("cuda:1", env)
    assert (first.key, first.kind, first.peaks["fp32_flops_per_s"]) == ("l4", "gpu", 3.0e13)
    assert (second.key, second.peaks["fp32_flops_per_s"]) == ("h100-sxm", 6.7e13)
    missing = device_of("cuda:3", env)
    assert missing.entry is None and missing.peaks == {} and missing.name == "unknown GPU (cuda:3)"


def test_cnn_rows_are_computed_from_rows_not_a_store():
    """`hw measured`'s rows: from result rows, their runs' environments and the host's peaks runs. The latest
    measurement of a case wins; the bandwidth is the theoretical one where known, else the best measured
    copy/triad of the same host."""
    from dlperf.hardware.measured import cnn_rows

    host = {"cpu_model": "AMD EPYC 7B13", "hostname_sha256": "h", "threads": 2, "cpu_physical_cores": 2, "gpus": [],
            "cpu_peaks_theoretical": {"fp32_flops_per_s": 1e11, "mem_bw_bytes_per_s": None, "assumptions": "2 cores"}}

    now = datetime.now(UTC)
    common = {"case_key": "k", "repetition": 0, "env_id": 1, "status": "ok", "device": "cpu", "started_at": now,
              "finished_at": now}

    def cnn(run_id: str, batch: int, ips: float, threads: int | None = None) -> CaseResult:
        return CaseResult.from_row(common | {
            "run_id": run_id, "workload": "cnn", "framework": "torch",
            "params": {"model": "alexnet", "batch": batch, "image_size": 112},
            "metrics": {"samples_per_s": ips, "flops_per_s": 1e10, "samples_per_call": batch, "threads": threads}})

    peaks = [(host, [CaseResult.from_row(common | {"run_id": "peaks-1", "workload": "peaks", "framework": "numpy",
                                                   "params": {"kind": "copy"}, "metrics": {"bytes_per_s": 20e9}})])]
    rows = cnn_rows([cnn("r1", 8, 10.0), cnn("r2", 8, 12.0), cnn("r2", 2, 5.0)], {"r1": host, "r2": host}, peaks)
    assert sorted(r["batch"] for r in rows) == [2, 8]
    b8 = next(r for r in rows if r["batch"] == 8)
    assert (b8["images_per_s"], b8["run_id"], b8["pct_of_peak"]) == (12.0, "r2", 10.0)
    assert b8["bw_bytes_per_s"] == 20e9 and b8["bw_source"] == "measured copy/triad (dlperf peaks)"
    with_bw = {**host, "cpu_peaks_theoretical": {**host["cpu_peaks_theoretical"], "mem_bw_bytes_per_s": 50e9}}
    [row] = cnn_rows([cnn("r3", 8, 1.0)], {"r3": with_bw}, peaks)
    assert (row["bw_bytes_per_s"], row["bw_source"]) == (50e9, "theoretical")
    assert cnn_rows([cnn("r1", 8, 10.0)], {"r1": host}, [])[0]["bw_source"] == "unknown (run `dlperf peaks`)"
    # A case on 1 thread of the 2 cores is judged against those cores' share of the peak, as the model reports are.
    [one] = cnn_rows([cnn("r4", 8, 12.0, threads=1)], {"r4": host}, peaks)
    assert one["pct_of_peak"] == 20.0 and one["peak_source"] == "2 cores; of it, the 1 of 2 cores the run's threads use"
    # ... and so is the efficiency that calibrates `recommend`: the same speed on half the cores is twice as efficient
    from dlperf.hardware.recommend import _efficiency_of

    [both] = cnn_rows([cnn("r5", 8, 12.0, threads=2)], {"r5": host}, peaks)
    assert (one["compute_share"], both["compute_share"]) == (0.5, 1.0)
    assert _efficiency_of(one) == pytest.approx(2 * _efficiency_of(both), rel=1e-12)
    # amp on a CPU without a bf16 peak: the row has no % of peak, recommend falls back to the fp32 peak, and the
    # share still applies to it
    amp = CaseResult.from_row(common | {"run_id": "r6", "workload": "cnn", "framework": "torch",
                                        "params": {"model": "alexnet", "batch": 8, "image_size": 112,
                                                   "precision": "amp"},
                                        "metrics": {"samples_per_s": 12.0, "flops_per_s": 1e10, "samples_per_call": 8,
                                                    "threads": 1}})
    [half] = cnn_rows([amp], {"r6": host}, peaks)
    assert half["pct_of_peak"] is None and half["compute_share"] == 0.5
