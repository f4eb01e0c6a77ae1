"""The runtimes' variants of the model workload (`ort:*`, `ov:*`): which framework runs each, and that the setting
a variant names is the one the session or the compiled model really has."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.frameworks import get_framework
from dlperf.workloads.model import variants as V


def tiny_onnx(path: Path) -> Path:
    """y = relu(x @ W): one MatMul and one Relu, float32 [2, 4] -> [2, 3]."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, name="W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                              "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_each_variant_runs_on_its_own_framework_and_eager_on_all() -> None:
    assert V.runs("torch", "compile") and V.runs("onnxruntime", "ort:basic") and V.runs("openvino", "ov:throughput")
    assert not V.runs("torch", "ort:all") and not V.runs("onnxruntime", "export") and not V.runs("openvino", "ort:none")
    assert all(V.runs(f, V.EAGER) for f in ("torch", "onnxruntime", "openvino"))
    assert set(V.RUN_BY) == set(V.VARIANTS) - {V.EAGER}
    assert "is an onnxruntime setting; torch runs eager" in V.not_run_by("torch", "ort:basic")
    assert [V.ort_level(n) for n in ("eager", "ort:none", "ort:basic", "ort:all")] == ["all", "none", "basic", "all"]
    assert [V.ov_hint(n) for n in ("eager", "ov:latency", "ov:throughput")] == ["LATENCY", "LATENCY", "THROUGHPUT"]


@pytest.mark.parametrize("variant, level", [("ort:none", "ORT_DISABLE_ALL"), ("ort:basic", "ORT_ENABLE_BASIC"),
                                            ("ort:all", "ORT_ENABLE_ALL"), ("eager", "ORT_ENABLE_ALL")])
def test_an_ort_variant_opens_its_session_at_its_level(tmp_path: Path, variant: str, level: str) -> None:
    fw = get_framework("onnxruntime")
    ort = fw.import_module()
    fw.set_threads(1)
    sess = fw.session(str(tiny_onnx(tmp_path / "t.onnx")), "cpu", V.ort_level(variant))
    assert sess.get_session_options().graph_optimization_level == getattr(ort.GraphOptimizationLevel, level)


@pytest.mark.parametrize("variant", ["ov:latency", "ov:throughput", "eager"])
def test_an_ov_variant_compiles_with_its_hint(tmp_path: Path, variant: str) -> None:
    fw = get_framework("openvino")
    fw.import_module()
    fw.set_threads(1)
    compiled = fw.compile(str(tiny_onnx(tmp_path / "t.onnx")), "cpu", "fp32", hint=V.ov_hint(variant))
    assert str(compiled.get_property("PERFORMANCE_HINT")) == V.ov_hint(variant)
    if V.ov_hint(variant) == "LATENCY":
        assert int(compiled.get_property("NUM_STREAMS")) == 1  # dlperf's default: one stream


@pytest.mark.parametrize("variant", ["ort:none", "ov:throughput"])
def test_every_runtime_variant_shares_eagers_export(monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    """A runtime's variant is a setting of the session or the compiled model, not another model: its export is the
    one eager's cases use (the export cache is keyed by the params it is given)."""
    from dlperf.workloads.model import ModelParams
    from dlperf.workloads.model import onnxruntime_model as om

    asked: list[ModelParams] = []
    monkeypatch.setattr(om, "prepared", lambda p, seed: asked.append(p) or ("m.onnx", {}, [], {}))
    fw = get_framework("onnxruntime")
    om.runtime_inputs(fw, ModelParams(source="dlperf:lenet5", variant=variant, precision="int8"))
    (p,) = asked
    assert p.variant == "eager" and p.precision == "fp32"
