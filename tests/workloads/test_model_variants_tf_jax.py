"""The model workload's TensorFlow and JAX variants by name, without importing either: graph and xla belong to
tensorflow, jit to jax, `no-jit` is JAX's eager, each (family, variant) runs on its mode adapter, and a case with no
twin on those frameworks is unsupported with its reason."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.workloads import get_workload
from dlperf.workloads.model import ModelParams, modes
from dlperf.workloads.model import variants as V

MODEL = get_workload("model")


def case(source: str = "dlperf:mlp-small", **kw: object) -> SimpleNamespace:
    """What `modes.check` reads of a case, without the source's own checks (a file need not exist)."""
    return SimpleNamespace(**({"source": source, "task": "infer", "precision": "fp32", "input": None,
                               "inputs_fn": None} | kw))


def test_no_jit_is_eager_and_an_unknown_name_lists_the_alias() -> None:
    assert V.check_variant("no-jit") == "eager"
    assert ModelParams(source="dlperf:mlp-small", variant="no-jit").variant == "eager"
    with pytest.raises(ValidationError, match="no-jit is eager"):
        ModelParams(source="dlperf:mlp-small", variant="nojit")


def test_each_new_variant_runs_on_its_family_only() -> None:
    assert (V.RUN_BY["graph"], V.RUN_BY["xla"], V.RUN_BY["jit"]) == ("tensorflow", "tensorflow", "jax")
    assert V.runs("tensorflow", "xla") and V.runs("jax", "jit") and V.runs("jax", "eager")
    assert not V.runs("torch", "xla") and not V.runs("jax", "graph") and not V.runs("tensorflow", "jit")
    assert V.not_run_by("torch", "xla") == ("variant xla is a tensorflow mode; torch runs eager and its own "
                                            "variants only")


@pytest.mark.parametrize(("framework", "variant", "adapter"), [
    ("tensorflow", None, "tensorflow-eager"), ("tensorflow", "graph", "tensorflow"),
    ("tensorflow", "xla", "tensorflow-xla"), ("jax", "eager", "jax-nojit"), ("jax", "no-jit", "jax-nojit"),
    ("jax", "jit", "jax"), ("torch", "compile", "torch"), ("onnxruntime", "ort:basic", "onnxruntime"),
    ("tensorflow-xla", "eager", "tensorflow-xla")])  # a mode adapter named as the framework stays itself
def test_the_worker_gets_the_variants_mode_adapter(framework: str, variant: str | None, adapter: str) -> None:
    raw = {"source": "dlperf:mlp-small"} | ({"variant": variant} if variant else {})
    assert MODEL.adapter(framework, raw) == adapter


def test_a_mode_adapter_named_with_another_variant_is_refused() -> None:
    with pytest.raises(UnsupportedError, match=r"variants of framework tensorflow .*xla \(tensorflow-xla\)"):
        modes.mode_adapter(get_framework("tensorflow-xla"), "eager")
    assert modes.mode_adapter(get_framework("jax-nojit"), "eager").name == "jax-nojit"


@pytest.mark.parametrize(("family", "kw", "why"), [
    ("tensorflow", {"source": "net.py:Net"}, "runs dlperf's own models only"),
    ("jax", {"source": "model.onnx"}, "runs dlperf's own models only"),
    ("tensorflow", {"source": "hf:gpt2"}, "a Hugging Face model has no tensorflow build"),
    ("jax", {"source": "dlperf:lenet5"}, "dlperf has no JAX CNN"),
    ("tensorflow", {"precision": "int8"}, "fp32 here, not int8: dlperf has no tensorflow int8 quantizer"),
    ("jax", {"input": ["x:float32[B,4]"]}, "its own example inputs"),
    ("jax", {"task": "train"}, "study compilers_xla"),
    ("tensorflow", {"source": "dlperf:alexnet", "task": "generate"}, "not a causal language model")])
def test_a_case_without_a_twin_is_unsupported_with_its_reason(family: str, kw: dict, why: str) -> None:
    with pytest.raises(UnsupportedError, match=why.replace("(", r"\(")):
        modes.check(family, case(**kw))  # type: ignore[arg-type]


def test_the_twins_kinds() -> None:
    assert [modes.kind(s) for s in ("dlperf:lenet5", "dlperf:mlp-small", "dlperf:gpt2-tiny", "hf:gpt2")] == \
        ["cnn", "mlp", "transformer", None]
    assert modes.check("tensorflow", case("dlperf:gpt2-tiny", task="generate")) == "transformer"  # type: ignore[arg-type]
