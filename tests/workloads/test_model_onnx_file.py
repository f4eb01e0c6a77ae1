"""A FILE.onnx source's inputs and reference (`workloads.model.onnx_file`) on graphs built with onnx.helper: fixed
dimensions kept, symbolic ones bound by the batch (first axis) and the sequence (others), seeded values of each
declared type, and `not checked` with the reason where onnxruntime is missing."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from dlperf.sources import SourceError  # noqa: E402
from dlperf.workloads.model import ModelParams, onnx_file  # noqa: E402
from dlperf.workloads.model.onnxruntime_model import info_of  # noqa: E402


def _graph(path: Path | None = None) -> Any:
    """ids int64[N, S], mask bool[N, S], x float32[N, 3] -> y = x + 1 (float32[N, 3])."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "S"]),
              helper.make_tensor_value_info("mask", TensorProto.BOOL, ["N", "S"]),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])]
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if path is not None:
        onnx.save(model, str(path))
    return model


def test_symbolic_dimensions_are_bound_and_fixed_ones_kept() -> None:
    shapes = onnx_file.input_shapes(_graph().graph, 4, 7)
    assert {n: (dims, str(dt)) for n, (dims, dt) in shapes.items()} == {
        "ids": ([4, 7], "int64"), "mask": ([4, 7], "bool"), "x": ([4, 3], "float32")}
    with pytest.raises(SourceError, match=r"input 'ids' axis 1 is symbolic \(S\): give --seq"):
        onnx_file.input_shapes(_graph().graph, 4, None)


def test_feeds_are_seeded_and_of_each_declared_type() -> None:
    shapes = onnx_file.input_shapes(_graph().graph, 2, 5)
    a, b, c = (onnx_file.make_feeds(shapes, s) for s in (0, 0, 1))
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["x"], c["x"])
    assert a["ids"].dtype == np.int64 and set(np.unique(a["ids"])) <= {0, 1}
    assert a["mask"].dtype == np.bool_ and a["x"].dtype == np.float32 and a["x"].shape == (2, 3)


def test_a_float32_input_is_drawn_without_a_float64_copy() -> None:
    """A maxbatch search counts what a case holds: a float32 input drawn as float64 and cast held three times its
    size at once (seen: a graph reducing a 100 MB float32 input a sample fitted batch 3 under a 1 GiB cap, and
    batch 9 once drawn in float32)."""
    import tracemalloc

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "wide",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1_000_000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1_000_000])])
    shapes = onnx_file.input_shapes(graph, 4, None)
    tracemalloc.start()
    try:
        feeds = onnx_file.make_feeds(shapes, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert feeds["x"].dtype == np.float32 and feeds["x"].nbytes == 16_000_000
    assert peak < 1.5 * feeds["x"].nbytes, peak


def test_the_reference_is_onnxruntimes_and_without_it_not_checked(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    path = tmp_path / "g.onnx"
    _graph(path)
    p = ModelParams(source=str(path), seq=5, batch=2)
    _, feeds, refs, meta = onnx_file.prepared(p, 0)
    outputs = refs()
    assert outputs is not None and np.allclose(outputs[0], feeds["x"].astype(np.float64) + 1.0)
    assert meta["self_check"] is None and meta["param_count"] == 1
    real = builtins.__import__

    def no_ort(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnxruntime":
            raise ModuleNotFoundError("no onnxruntime here")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ort)
    _, _, refs, meta = onnx_file.prepared(p, 0)
    meta["_refs"] = refs
    verdict = info_of(meta, p, lambda: [])["gate"]()
    assert verdict == {"status": "not checked",
                       "reason": "onnxruntime is not installed: an ONNX file has no other reference"}


def test_the_reference_runs_only_when_the_gate_asks_after_the_timing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Its session and float64 copies are not in the timed path's memory (a maxbatch search of FILE.onnx
    searches the path alone); a reference that fails leaves the path `not checked` with the error."""
    pytest.importorskip("onnxruntime")
    path = tmp_path / "g.onnx"
    _graph(path)
    p = ModelParams(source=str(path), seq=5, batch=2)
    ran: list[int] = []
    real = onnx_file.reference
    monkeypatch.setattr(onnx_file, "reference", lambda *a: ran.append(1) or real(*a))
    _, feeds, refs, meta = onnx_file.prepared(p, 0)
    assert ran == []
    meta["_refs"] = refs
    good = info_of(meta, p, lambda: [feeds["x"].astype(np.float64) + 1.0])["gate"]
    assert ran == []
    assert good()["status"] == "pass" and ran == [1]

    def broken(*a: Any, **k: Any) -> Any:
        raise MemoryError("no room for the reference")

    monkeypatch.setattr(onnx_file, "reference", real)
    import onnxruntime as ort

    monkeypatch.setattr(ort, "InferenceSession", broken)
    _, _, refs, meta = onnx_file.prepared(p, 0)
    meta["_refs"] = refs
    verdict = info_of(meta, p, lambda: [])["gate"]()
    assert verdict == {"status": "not checked",
                       "reason": "the reference run failed: MemoryError: no room for the reference"}
