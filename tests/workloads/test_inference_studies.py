"""The shipped inference studies (issue 17): `inference` (the CNNs) and `inference_transformer` load, list the
training frameworks and the runtimes, run task infer only with every call timed alone, and keep their quick
variants to the small grids that finish in about a minute on a small CPU."""

from __future__ import annotations

import pytest

from dlperf.studies import load_study

RUNTIMES = {"onnxruntime", "openvino"}


@pytest.mark.parametrize("name,workload", [("inference", "cnn"), ("inference_transformer", "transformer")])
def test_full_study_sweeps_the_batch_on_frameworks_and_runtimes(name, workload):
    s = load_study(name)
    assert s.workload == workload and s.settings.per_call
    assert {c.params["task"] for c in s.cases} == {"infer"}
    assert RUNTIMES | {"torch", "tensorflow"} <= {c.framework for c in s.cases}
    assert {c.device for c in s.cases} == {"cpu", "cuda"}
    assert not [c for c in s.cases if c.framework == "openvino" and c.device != "cpu"]  # OpenVINO: CPU only
    batches = sorted({c.params["batch"] for c in s.cases})
    assert batches[:6] == [1, 2, 4, 8, 16, 32]


def test_cnn_inference_study_models_and_quick_cases():
    full = load_study("inference")
    assert {c.params["model"] for c in full.cases} == {"alexnet", "googlenet", "caffenet", "lenet5"}
    assert "tensorflow-eager" in {c.framework for c in full.cases}
    cpu = [c for c in full.cases if c.device == "cpu"]
    assert max(c.params["batch"] for c in cpu) == 32 and {c.params["precision"] for c in cpu} == {"fp32"}
    quick = load_study("inference", quick=True)
    assert len(quick.cases) == 12  # (lenet5 at 1, 16; alexnet at 1, 4) x (torch, onnxruntime, openvino)
    assert {c.framework for c in quick.cases} == {"torch"} | RUNTIMES and {c.device for c in quick.cases} == {"cpu"}
    assert {(c.params["model"], c.params["batch"]) for c in quick.cases} == {
        ("lenet5", 1), ("lenet5", 16), ("alexnet", 1), ("alexnet", 4)}
    assert quick.settings.per_call and quick.settings.budget_s == 1.0


def test_transformer_inference_study_quick_cases():
    full = load_study("inference_transformer")
    assert {c.params["model"] for c in full.cases} == {"gpt2-small", "bert-base"}
    numpy = {(c.device, c.params["precision"]) for c in full.cases if c.framework == "numpy"}
    assert numpy == {("cpu", "fp32")}
    quick = load_study("inference_transformer", quick=True)
    assert len(quick.cases) == 12  # (gpt2-tiny, bert-tiny) x batch (1, 4) x (torch, onnxruntime, openvino)
    assert {c.framework for c in quick.cases} == {"torch"} | RUNTIMES
    assert {c.params["seq_len"] for c in quick.cases} == {64}
