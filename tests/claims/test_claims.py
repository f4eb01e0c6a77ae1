"""Claims as data, verdicts by rule: the claims file, and every rule on a synthetic run whose numbers match
its claim (holds), one whose numbers contradict it (does not hold, by how much) and a CPU-only run or a run
without what the claim needs (cannot check here, naming what is missing)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dlperf.claims import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS, evaluate
from dlperf.claims.loader import Claim, load_claims, parse_claims
from dlperf.claims.rules import RULES
from dlperf.core.result import CaseResult
from dlperf.report.study import ReportData
from dlperf.timing.measurement import Measurement
from tests.factories import report_data, run_row, stored

#: Spread of the synthetic samples around their median (0.5% either side): a quiet measurement.
SPREAD = (0.995, 1.0, 1.005, 0.998, 1.002, 1.0, 0.999)
GPU_ENV = {"cpu_model": "Test CPU", "gpus": [{"index": 0, "name": "NVIDIA GeForce GTX 1070",
                                             "peaks_theoretical": {"fp32_flops_per_s": 6.5e12,
                                                                   "mem_bw_bytes_per_s": 256e9}}]}


#: The rates a stored case carries (recomputed from the samples on load, as for a real row).
RATES = ("samples_per_call", "time_per_sample_s", "samples_per_s", "flops_per_call", "flops_per_s", "bytes_per_call",
         "bytes_per_s", "arithmetic_intensity")


def case(workload: str, framework: str, device: str, params: dict[str, Any], time_s: float, *,
         status: str = "ok", reason: str | None = None, validity: str | None = "valid", run_id: str = "run-a",
         **metrics: Any) -> CaseResult:
    """A stored-like case: raw samples around `time_s` per call, its statistics recomputed from them on load."""
    m = Measurement(tuple(time_s * f for f in SPREAD), (1,) * len(SPREAD)).to_dict() if status == "ok" else None
    kept = {**dict.fromkeys(RATES), "median_s": 0.0, "device": device, **metrics} if status == "ok" else {}
    r = stored(f"{workload}/{framework}/{device}/{params}", workload=workload, framework=framework, device=device,
               params=params, status=status, reason=reason, measurement=m, metrics=kept, run_id=run_id)
    if validity is not None and r.metrics is not None:
        r = r.model_copy(update={"metrics": r.metrics.model_copy(update={
            "validity": validity, "validity_reason": f"synthetic {validity} case"})})
    return r


def run(results: list[CaseResult], run_id: str = "run-a", env: dict[str, Any] | None = None) -> ReportData:
    return report_data(results, run=run_row(run_id), env=env)


def judge(claim_id: str, datas: list[ReportData]):
    """The verdict of one claim from evaluate()."""
    return next(v for v in evaluate(datas) if v.claim_id == claim_id)


# --- the claims file ---------------------------------------------------------------------------------------
def test_every_claim_has_every_field_and_a_known_rule() -> None:
    claims = load_claims()
    assert len(claims) >= 15
    for c in claims:
        for name in Claim.model_fields:
            if name != "params":
                assert str(getattr(c, name)).strip(), f"{c.id}: {name} is empty"
        assert c.rule in RULES
    ids = {c.id for c in claims}
    for needed in ("000-gpu-speedup-tensors-large", "000-edp-gpu-every-program", "001-tf-faster-cpu",
                   "001-tf-faster-gpu", "001-tf-up-to-2x-gpu", "001-tf-less-memory", "002-elementwise-under-1pct",
                   "002-dot-35-to-89pct", "003-seq-over-vec-mlp", "003-seq-over-gpu-mlp", "003-vec-over-gpu-mlp",
                   "003-vec-over-gpu-cnn", "004-datasheet-gpus", "004-gtx1070-fastest-gpu"):
        assert needed in ids
    assert every_rule_is_used(claims)


def every_rule_is_used(claims: tuple[Claim, ...]) -> bool:
    return {c.rule for c in claims} == set(RULES)


def test_a_malformed_claims_file_is_refused() -> None:
    good = load_claims()[0].model_dump()
    with pytest.raises(ValueError, match="unknown rule"):
        parse_claims(yaml.safe_dump([{**good, "rule": "guess"}]))
    with pytest.raises(ValueError, match="duplicate"):
        parse_claims(yaml.safe_dump([good, good]))
    with pytest.raises(ValueError):
        parse_claims(yaml.safe_dump([{k: v for k, v in good.items() if k != "tolerance"}]))


def test_no_runs_gives_one_verdict_per_claim_and_every_run_claim_cannot_be_checked() -> None:
    verdicts = evaluate([])
    assert [v.claim_id for v in verdicts] == [c.id for c in load_claims()]
    for v, c in zip(verdicts, load_claims(), strict=True):
        if c.study == "catalog":  # judged from the catalog, no run needed
            assert v.verdict in (HOLDS, DOES_NOT_HOLD)
        else:
            assert v.verdict == CANNOT_CHECK and v.measured is None
            assert f"no {c.study} run given; run `{c.run}`" == v.detail


# --- study 000 ---------------------------------------------------------------------------------------------
def mlp(variant: str, size: str, device: str, time_s: float, energy_j: float | None = None, **kw: Any) -> CaseResult:
    energy = ({"measured": True, "energy_per_call_j": energy_j, "mean_power_w": energy_j / time_s}
              if energy_j is not None else {"measured": False, "reason": "rapl: no RAPL package zones"})
    return case("mlp", "torch", device, {"variant": variant, "size": size, "iterations": 500, "dtype": "float32"},
                time_s, energy=energy, **kw)


def test_gpu_speedup_holds_near_87x_and_not_at_12x() -> None:
    holds = judge("000-gpu-speedup-tensors-large", [run([mlp("tensors", "large", "cpu", 0.876),
                                                          mlp("tensors", "large", "cuda", 0.01)])])
    assert holds.verdict == HOLDS and holds.measured == "87.6x" and holds.run_ids == ("run-a",)
    low = judge("000-gpu-speedup-tensors-large", [run([mlp("tensors", "large", "cpu", 0.12),
                                                        mlp("tensors", "large", "cuda", 0.01)])])
    assert low.verdict == DOES_NOT_HOLD and "measured 12x, 7.3x below the paper's 87.6x" in low.detail
    cpu_only = judge("000-gpu-speedup-tensors-large", [run([mlp("tensors", "large", "cpu", 0.12)])])
    assert cpu_only.verdict == CANNOT_CHECK and "no CUDA GPU in these runs" in cpu_only.detail


def test_an_invalid_case_never_decides_and_a_contended_one_is_named() -> None:
    bad = judge("000-gpu-speedup-tensors-large", [run([mlp("tensors", "large", "cpu", 0.876),
                                                        mlp("tensors", "large", "cuda", 0.01, validity="invalid")])])
    assert bad.verdict == CANNOT_CHECK and "invalid" in bad.detail
    busy = judge("000-gpu-speedup-tensors-large", [run([mlp("tensors", "large", "cpu", 0.876, validity="contended"),
                                                         mlp("tensors", "large", "cuda", 0.01)])])
    assert busy.verdict == HOLDS and "contended" in busy.detail


def test_edp_holds_for_every_program_or_says_which_fails() -> None:
    variants = ("tensors", "autograd", "custom_function")
    good = [c for v in variants for c in (mlp(v, "small", "cpu", 0.1, 2.0), mlp(v, "small", "cuda", 0.01, 1.0))]
    v = judge("000-edp-gpu-every-program", [run(good)])
    assert v.verdict == HOLDS, v.detail  # EDP ratio = (2 x 0.1) / (1 x 0.01) = 20
    worse = good[:-1] + [mlp("custom_function", "small", "cuda", 0.05, 3.0)]  # (2 x 0.1) / (3 x 0.05) = 1.33
    v = judge("000-edp-gpu-every-program", [run(worse)])
    assert v.verdict == DOES_NOT_HOLD and "custom_function only 1.33x" in v.detail
    no_meter = [c for v in variants for c in (mlp(v, "small", "cpu", 0.1), mlp(v, "small", "cuda", 0.01, 1.0))]
    v = judge("000-edp-gpu-every-program", [run(no_meter)])
    assert v.verdict == CANNOT_CHECK and "no energy meter on the CPU: rapl: no RAPL package zones" in v.detail
    cpu_only = judge("000-edp-gpu-every-program", [run([mlp(v, "small", "cpu", 0.1, 2.0) for v in variants])])
    assert cpu_only.verdict == CANNOT_CHECK and "no CUDA GPU" in cpu_only.detail


# --- study 003 ---------------------------------------------------------------------------------------------
def nn(framework: str, model: str, time_s: float, **kw: Any) -> CaseResult:
    device = "cuda" if framework.startswith("nn-cuda") else "cpu"
    return case("backends", framework, device, {"model": model, "batch_size": 32}, time_s, **kw)


@pytest.mark.parametrize(("claim_id", "num", "den", "model", "paper"), [
    ("003-seq-over-vec-mlp", "nn-sequential", "nn-vectorized", "mlp", 77),
    ("003-seq-over-gpu-mlp", "nn-sequential", "nn-cuda", "mlp", 25.6),
    ("003-vec-over-gpu-mlp", "nn-vectorized", "nn-cuda", "mlp", 0.33),
    ("003-vec-over-gpu-cnn", "nn-vectorized", "nn-cuda", "cnn", 62.5)])
def test_backend_speedups(claim_id: str, num: str, den: str, model: str, paper: float) -> None:
    v = judge(claim_id, [run([nn(num, model, paper * 1e-3), nn(den, model, 1e-3)])])
    assert v.verdict == HOLDS and v.measured == f"{paper:.3g}x", v.detail
    v = judge(claim_id, [run([nn(num, model, paper * 10e-3), nn(den, model, 1e-3)])])  # 10x the paper's
    assert v.verdict == DOES_NOT_HOLD and f"10x above the paper's {paper:g}x" in v.detail
    if den == "nn-cuda":
        gone = nn(den, model, 0, status="unsupported", reason="the cuda backend needs CuPy and an NVIDIA GPU")
        v = judge(claim_id, [run([nn(num, model, 1e-3), gone])])
        assert v.verdict == CANNOT_CHECK and "no CUDA GPU in these runs" in v.detail and "CuPy" in v.detail


def test_the_gpu_winning_contradicts_the_gpu_losing_whatever_the_factor() -> None:
    v = judge("003-vec-over-gpu-mlp", [run([nn("nn-vectorized", "mlp", 1.2e-3), nn("nn-cuda", "mlp", 1e-3)])])
    assert v.verdict == DOES_NOT_HOLD and "order of the two is reversed" in v.detail


def test_the_first_run_that_decides_is_used_and_a_missing_study_names_its_command() -> None:
    cpu = run([nn("nn-sequential", "mlp", 77e-3), nn("nn-vectorized", "mlp", 1e-3)], "run-cpu")
    v = judge("003-seq-over-vec-mlp", [run([mlp("tensors", "large", "cpu", 1)], "run-mlp"), cpu])
    assert v.verdict == HOLDS and v.run_ids == ("run-cpu",)
    v = judge("003-seq-over-vec-mlp", [run([mlp("tensors", "large", "cpu", 1)])])
    assert v.verdict == CANNOT_CHECK and v.detail == "no backends run given; run `dlperf run backends --quick`"


# --- study 002 ---------------------------------------------------------------------------------------------
def op(name: str, size_mb: float, gflops: float, device: str = "cuda", **kw: Any) -> CaseResult:
    """An ops case doing 1 GFLOP per call at `gflops` GFLOP/s (1/12 FLOP per byte for element-wise ops)."""
    nbytes = 12e9 if name != "dot" else 1e7
    return case("ops", "torch", device, {"op": name, "size_mb": size_mb, "dtype": "float32"}, 1.0 / gflops,
                flops_per_call=1e9, bytes_per_call=nbytes, samples_per_call=None, **kw)


def test_elementwise_efficiency_under_one_percent() -> None:
    ok = [op(o, s, 20) for o in ("add", "mul", "scalar") for s in (2, 8)]  # 20 GFLOP/s of 6500: 0.31%
    v = judge("002-elementwise-under-1pct", [run(ok, env=GPU_ENV)])
    assert v.verdict == HOLDS and v.measured == "0.308-0.308%", v.detail
    v = judge("002-elementwise-under-1pct", [run([*ok, op("add", 32, 130)], env=GPU_ENV)])  # 2%
    assert v.verdict == DOES_NOT_HOLD and "1 of 7 cases at or above 1%, up to 2%" in v.detail
    v = judge("002-elementwise-under-1pct", [run([op("add", 2, 20, device="cpu")], env=GPU_ENV)])
    assert v.verdict == CANNOT_CHECK and "no CUDA GPU in these runs" in v.detail
    v = judge("002-elementwise-under-1pct", [run(ok, env={"gpus": [{"index": 0, "name": "x"}]})])
    assert v.verdict == CANNOT_CHECK and "peak is unknown" in v.detail


def test_dot_efficiency_in_the_papers_band() -> None:
    v = judge("002-dot-35-to-89pct", [run([op("dot", s, 4000) for s in (5, 9, 17)], env=GPU_ENV)])  # 61.5%
    assert v.verdict == HOLDS and v.measured == "torch 61.5%", v.detail
    v = judge("002-dot-35-to-89pct", [run([op("dot", s, 650) for s in (5, 9, 17)], env=GPU_ENV)])  # 10%
    assert v.verdict == DOES_NOT_HOLD and "15 points below 25%" in v.detail
    v = judge("002-dot-35-to-89pct", [run([op("dot", 5, 650, device="cpu")], env=GPU_ENV)])
    assert v.verdict == CANNOT_CHECK and "no CUDA GPU" in v.detail


# --- study 001 ---------------------------------------------------------------------------------------------
def cnn(framework: str, device: str, model: str, batch: int, time_s: float, mem: float = 1e9, **kw: Any) -> CaseResult:
    memory = ({"peak_device_mem_bytes": int(mem)} if device != "cpu" else
              {"peak_rss_bytes": int(mem + 5e8), "baseline_rss_bytes": int(5e8)})
    return case("cnn", framework, device, {"model": model, "batch": batch, "image_size": 112}, time_s,
                samples_per_call=batch, **memory, **kw)


def frameworks(device: str, caffe_over_tf: float, caffe_mem: float = 2e9) -> list[CaseResult]:
    """Caffe and TensorFlow at two models and three batches; Caffe `caffe_over_tf` times slower."""
    return [c for m in ("alexnet", "googlenet") for b in (1, 8, 32)
            for c in (cnn("tensorflow", device, m, b, 0.01 * b, 1e9),
                      cnn("caffe", device, m, b, 0.01 * b * caffe_over_tf, caffe_mem))]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_tensorflow_faster_than_caffe(device: str) -> None:
    claim = f"001-tf-faster-{'cpu' if device == 'cpu' else 'gpu'}"
    v = judge(claim, [run(frameworks(device, 1.5))])
    assert v.verdict == HOLDS and v.measured.startswith("tensorflow faster at 6 of 6 points"), v.detail
    v = judge(claim, [run(frameworks(device, 0.8))])
    assert v.verdict == DOES_NOT_HOLD and "tensorflow faster at only 0 of 6 points" in v.detail
    no_caffe = [c for c in frameworks(device, 1.5) if c.framework != "caffe"]
    no_caffe.append(cnn("caffe", device, "alexnet", 1, 0, status="unsupported", reason="No module named 'caffe'"))
    v = judge(claim, [run(no_caffe)])
    assert v.verdict == CANNOT_CHECK and "Caffe is not installed" in v.detail


def test_up_to_two_times_on_the_gpu_and_cannot_check_on_a_cpu_run() -> None:
    v = judge("001-tf-up-to-2x-gpu", [run(frameworks("cuda", 1.96))])
    assert v.verdict == HOLDS and v.measured == "1.96x", v.detail
    v = judge("001-tf-up-to-2x-gpu", [run(frameworks("cuda", 1.05))])
    assert v.verdict == DOES_NOT_HOLD and "1.9x below the paper's 2x" in v.detail
    v = judge("001-tf-up-to-2x-gpu", [run(frameworks("cpu", 1.96))])
    assert v.verdict == CANNOT_CHECK and "no CUDA GPU in these runs" in v.detail


def test_tensorflow_needs_less_memory() -> None:
    v = judge("001-tf-less-memory", [run(frameworks("cpu", 1.5, caffe_mem=2e9))])
    assert v.verdict == HOLDS and v.measured.startswith("tensorflow smaller at 6 of 6 points (2x"), v.detail
    v = judge("001-tf-less-memory", [run(frameworks("cpu", 1.5, caffe_mem=0.5e9))])
    assert v.verdict == DOES_NOT_HOLD and "less memory at only 0 of 6 points" in v.detail
    v = judge("001-tf-less-memory", [run([c for c in frameworks("cpu", 1.5) if c.framework != "caffe"])])
    assert v.verdict == CANNOT_CHECK and "Caffe is not in run run-a" in v.detail


# --- study 004 ---------------------------------------------------------------------------------------------
def gpu_env(name: str) -> dict[str, Any]:
    return {"cpu_model": "Test CPU", "gpus": [{"index": 0, "name": name, "peaks_theoretical": {}}]}


def test_gtx1070_fastest_over_runs_of_several_machines() -> None:
    def machine(name: str, run_id: str, time_s: float) -> ReportData:
        return run([cnn("torch", "cuda", "caffenet", 32, time_s, run_id=run_id)], run_id, gpu_env(name))

    fast = judge("004-gtx1070-fastest-gpu", [machine("NVIDIA GeForce GTX 1070", "r-1070", 0.1),
                                              machine("AMD Radeon RX 580", "r-580", 0.2)])
    assert fast.verdict == HOLDS and fast.measured.startswith("gtx-1070 320 img/s > rx-580 160 img/s"), fast.detail
    assert set(fast.run_ids) == {"r-1070", "r-580"}
    slow = judge("004-gtx1070-fastest-gpu", [machine("NVIDIA GeForce GTX 1070", "r-1070", 0.3),
                                              machine("AMD Radeon RX 580", "r-580", 0.2)])
    assert slow.verdict == DOES_NOT_HOLD and "rx-580 is 1.5x faster than gtx-1070" in slow.detail
    alone = judge("004-gtx1070-fastest-gpu", [run([cnn("torch", "cpu", "caffenet", 32, 0.3)], env=GPU_ENV)])
    assert alone.verdict == CANNOT_CHECK and "needs caffenet training on the gtx-1070" in alone.detail


def test_datasheet_claims_follow_hw_diff_study(monkeypatch: pytest.MonkeyPatch) -> None:
    import dlperf.hardware.catalog as catalog

    real = judge("004-datasheet-gpus", [])  # the shipped catalog: the RX 580's figures are wrong in the study
    assert real.verdict == DOES_NOT_HOLD and "rx-580 tdp_w 60 (vendor 185)" in real.detail
    rows = [{"device": "gtx-1070", "name": "GTX 1070", "figure": "tdp_w", "study": 150, "vendor": 150,
             "verdict": "agree", "source": "s"}]
    monkeypatch.setattr(catalog, "diff_study", lambda: rows)
    assert judge("004-datasheet-gpus", []).verdict == HOLDS
    monkeypatch.setattr(catalog, "diff_study", lambda: [{**rows[0], "device": "ncs2", "vendor": "unknown",
                                                         "verdict": "cannot check (vendor figure unknown)"}])
    v = judge("004-datasheet-accelerators", [])
    assert v.verdict == CANNOT_CHECK and "knows none of the vendor figures" in v.detail


def test_a_cpu_only_run_of_every_study_leaves_every_gpu_claim_uncheckable_with_its_reason() -> None:
    datas = [run([mlp(v, "large", "cpu", 0.1, None) for v in ("tensors", "autograd", "custom_function")], "m"),
             run(frameworks("cpu", 1.5), "c"), run([op("add", 2, 1, device="cpu"), op("dot", 2, 1, device="cpu")], "o"),
             run([nn("nn-sequential", "mlp", 77e-3), nn("nn-vectorized", "mlp", 1e-3)], "b")]
    by_id = {v.claim_id: v for v in evaluate(datas)}
    for claim in ("000-gpu-speedup-tensors-large", "000-edp-gpu-every-program", "001-tf-faster-gpu",
                  "001-tf-up-to-2x-gpu", "002-elementwise-under-1pct", "002-dot-35-to-89pct",
                  "003-seq-over-gpu-mlp", "003-vec-over-gpu-mlp", "003-vec-over-gpu-cnn"):
        assert by_id[claim].verdict == CANNOT_CHECK and "no CUDA GPU in these runs" in by_id[claim].detail, claim
    assert by_id["003-seq-over-vec-mlp"].verdict == HOLDS
    assert by_id["001-tf-faster-cpu"].verdict == HOLDS
