"""`dlperf maxbatch SOURCE`: a user's module (written here) searched along its batch under a memory cap, each probe
stored; a bad source is one `dlperf: error:` line, exit 2 and no store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import assert_one_line_error, user_model_files

#: `Big`: a 2-way head over the first 8 of 80 M floats a sample (320 MB): batch 1 fits under an 800 MiB cap (the
#: torch worker itself holds about 240 MiB), batch 2 cannot hold its inputs (640 MB) beside the worker.
MODELS = '''
import torch
from torch import nn

class Big(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 2)
    def forward(self, x):
        return self.lin(x[:, :8])

def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

def not_a_module():
    return 42
'''


@pytest.fixture(scope="module")
def user_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return user_model_files(tmp_path_factory.mktemp("user"), MODELS, "bad.onnx", b"not a protobuf at all")


def _probes(db: Path) -> dict[int, str]:
    with sqlite3.connect(db) as con:
        rows = con.execute("select case_key, status from results").fetchall()
    return {int(key.split("batch=")[1].split(",")[0]): status for key, status in rows}


def test_a_source_is_searched_to_the_batch_that_fits_under_the_cap(user_files: Path, tmp_path: Path,
                                                                   dlperf_main) -> None:
    """In this process (`dlperf.cli.main`, as the command line calls it): each probe still runs in its own worker
    under the cap; a subprocess for the command only added a Python start and dlperf's imports."""
    db = tmp_path / "m.db"
    res = dlperf_main("maxbatch", f"{user_files}/models.py:Big", "--input", "x:float32[B,80000000]", "--mem-limit",
                      "800MiB", "--max-batch", "4", "--plot-dir", str(tmp_path / "plots"), "--db", str(db))
    assert res.returncode == 0, res.stderr
    assert _probes(db) == {1: "ok", 2: "oom"}
    out = " ".join(res.stdout.split())
    assert "largest batch that fits under a 800 MiB cap: 1 (batch 2 ran out of memory)" in out
    assert f"probes of {user_files}/models.py:Big input=x:float32[B,80000000] task=train on torch cpu" in out


def _wide_onnx(path: Path, width: int) -> None:
    """y = relu(x), x float32[N, width] (N symbolic: bound by the batch): `width` floats a sample and no weights."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "wide",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_an_onnx_file_is_searched_on_onnxruntime_and_its_largest_batch_stored(tmp_path: Path, dlperf_main) -> None:
    """`dlperf maxbatch FILE.onnx`: its inference on onnxruntime, the batch bound into the graph's first axis.
    16 MB a sample: batch 1 fits under a 600 MiB cap (the worker itself holds about 200 MiB), batch 32 cannot
    hold its input; where the boundary falls between depends on onnxruntime's arena, so the test holds the
    printed answer to the probes stored. The path alone is searched: its input and output, 32 MB a sample, in
    the ~400 MiB the worker leaves (14 fit on the AMD VM); with the reference's session and float64 copies in
    the same memory, as before the reference ran after the timing, 2 did, so at least 6 must."""
    pytest.importorskip("onnxruntime", reason="the onnxruntime extra is not installed")
    model, db = tmp_path / "wide.onnx", tmp_path / "m.db"
    _wide_onnx(model, 4_000_000)
    res = dlperf_main("maxbatch", str(model), "--mem-limit", "600MiB", "--max-batch", "32", "--plot-dir",
                      str(tmp_path / "plots"), "--db", str(db))
    assert res.returncode == 0, res.stderr
    probes = _probes(db)
    ok = [b for b, status in probes.items() if status == "ok"]
    oom = [b for b, status in probes.items() if status == "oom"]
    assert 1 in ok and oom and sorted(ok + oom) == sorted(probes), probes  # nothing else (an error stops it)
    assert max(ok) < min(oom)
    assert max(ok) >= 6, probes
    out = " ".join(res.stdout.split())
    assert f"largest batch that fits under a 600 MiB cap: {max(ok)} (batch {min(oom)} ran out of memory)" in out
    assert "of wide.onnx task=infer on onnxruntime cpu" in out  # the file's one spelling: below the working folder
    with sqlite3.connect(db) as con:
        (variant, status, filters), = con.execute("select variant, status, filters from runs").fetchall()
    assert (variant, status) == ("wide.onnx task=infer", "complete") and '"framework": "onnxruntime"' in filters


@pytest.mark.parametrize("args, fragment", [
    (["{d}/nothere.py:net"], "no such file"),
    (["{d}/models.py:nosuch", "--input", "x:float32[B,8]"], "no name 'nosuch'"),
    (["{d}/raises.py:net"], "importing it raised RuntimeError: broken on import"),
    (["{d}/models.py:not_a_module", "--input", "x:float32[B,8]"], "returned a int, not a torch.nn.Module"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,5]"], "the model rejects its inputs"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,8]", "--task", "generate"], "not task generate"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,8]", "--framework", "tensorflow"],
     "tensorflow runs dlperf's own models only"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,8]", "--framework", "onnxruntime"],
     "onnxruntime is an inference runtime"),
    (["{d}/bad.onnx"], "bad.onnx: not a valid ONNX model"),
    (["lenet5", "--input", "x:float32[B,8]"], "--input is for a SOURCE target"),
    (["hf:nosuch_arch"], "unknown architecture 'nosuch_arch'"),
])
def test_a_bad_source_is_one_line_and_no_store(user_files: Path, tmp_path: Path, args: list[str], fragment: str,
                                               dlperf_main, preflight_in_this_process) -> None:
    """The preflight in this process (tests/cli/test_bench.py checks it in a user's)."""
    db = tmp_path / "s.db"
    res = dlperf_main("maxbatch", *(a.format(d=user_files) for a in args), "--mem-limit", "1GiB", "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, fragment)
    assert not db.exists()


def test_an_onnx_file_onnxruntime_cannot_run_is_one_line_and_no_store(tmp_path: Path, dlperf_main) -> None:
    """A graph that passes onnx's checker but fails when run (a Reshape to a size its input cannot have): the
    preflight runs the reference once, so the refusal is one line before any store exists (the reference of a
    case runs after its timing, so without the preflight each probe would end `error`)."""
    pytest.importorskip("onnxruntime", reason="the onnxruntime extra is not installed")
    import onnx
    from onnx import TensorProto, helper

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 7])
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7])], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path, db = tmp_path / "bad.onnx", tmp_path / "s.db"
    onnx.save(model, str(path))
    res = dlperf_main("maxbatch", str(path), "--mem-limit", "1GiB", "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, "the reference run failed")
    assert not db.exists()
