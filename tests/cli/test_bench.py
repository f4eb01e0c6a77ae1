"""`dlperf bench SOURCE` as a user runs it: bad sources end in one line and exit 2 with no store made; a
nondeterministic module is `nondeterministic`; a path that computes something else is `fail` and not ranked; the
shipped example on torch, onnxruntime and openvino at batch 1 and 32 passes with ratios and intervals.

The bench runs call `dlperf.cli.main` in this process (`dlperf_main`: the command line's own entry, its exit code,
stdout and stderr): every case still runs in its own worker process, and the source is still loaded and checked
in a fresh one, as for a user; what a subprocess added was one more Python start, dlperf's imports and
matplotlib's for each run's figures. One test runs the command in a user's process
(`test_a_source_that_raises_on_import_is_one_line_in_a_users_process`)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import assert_one_line_error, user_model_files
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
MODELS = '''
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
    def forward(self, x):
        return self.lin(x)

class Noisy(Net):
    def forward(self, x):
        return self.lin(x) + torch.rand(4)

class Exported(Net):
    def forward(self, x):  # the exported graph computes something else than eager
        return self.lin(x) + (1.0 if torch.onnx.is_in_onnx_export() else 0.0)

class NoTensor(Net):
    def forward(self, x):
        return 3

class NoParams(nn.Module):
    def forward(self, x):
        return torch.relu(x)

class BadExample(Net):
    def example_inputs(self, batch):
        raise ValueError("no example")

def net():
    return Net()

def raising_inputs(batch):
    raise ValueError("no data")

def no_batch_inputs():
    return torch.randn(1, 8)

def not_a_module():
    return 42
'''


@pytest.fixture(scope="module")
def user_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = user_model_files(tmp_path_factory.mktemp("user"), MODELS, "bad.onnx", b"not a protobuf at all")
    _tiny_onnx(d / "tiny.onnx")
    return d


def _tiny_onnx(path: Path) -> None:
    """y = relu(x @ w): x float32[N, S, 8] (both symbolic), w an 8 x 4 initializer (32 parameters)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                              "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S", 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.mark.parametrize("args, fragment", [
    (["{d}/nothere.py:net"], "no such file"),
    (["{d}/models.py:nosuch", "--input", "x:float32[B,8]"], "no name 'nosuch'"),
    (["{d}/raises.py:net"], "importing it raised RuntimeError: broken on import"),
    (["{d}/models.py:not_a_module", "--input", "x:float32[B,8]"], "returned a int, not a torch.nn.Module"),
    (["{d}/models.py:net", "--input", "x:float32[B,5]"], "the model rejects its inputs"),
    (["{d}/models.py:NoTensor", "--input", "x:float32[B,8]"], "its forward returned int, no tensor"),
    (["{d}/models.py:NoParams", "--input", "x:float32[B,8]", "--task", "train"],
     "task train needs parameters to update, and the model has none"),
    (["{d}/models.py:net", "--input", "x:float32[B,,8]"], "--input 'x:float32[B,,8]': an empty dimension"),
    (["{d}/models.py:net", "--input", "x:float32[B,8,]"], "--input 'x:float32[B,8,]': an empty dimension"),
    (["{d}/models.py:net"], "give its inputs"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--seq", "5"], "--seq 5 changes none of its inputs"),
    (["dlperf:lenet5", "--seq", "5"], "dlperf:lenet5: --seq 5 changes none of its inputs"),
    (["{d}/models.py:net", "--inputs", "{d}/models.py:raising_inputs"],
     "models.py:raising_inputs: calling it raised ValueError: no data"),
    (["{d}/models.py:net", "--inputs", "{d}/models.py:no_batch_inputs"],
     "models.py:no_batch_inputs: calling it raised TypeError: no_batch_inputs() takes 0 positional arguments"),
    (["{d}/models.py:BadExample"], "models.py:BadExample: example_inputs(1) raised ValueError: no example"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--task", "generate"], "not task generate"),
    (["{d}/bad.onnx"], "bad.onnx: not a valid ONNX model"),
    (["{d}/tiny.onnx"], "input 'x' axis 1 is symbolic (S): give --seq"),
    (["{d}/tiny.onnx", "--seq", "3", "--framework", "torch"], "runs on onnxruntime and openvino, not on torch"),
    (["{d}/tiny.onnx", "--seq", "3", "--task", "train"], "an ONNX file runs task infer, not train"),
    (["{d}/tiny.onnx", "--seq", "3", "--input", "x:float32[B,3,8]"], "its graph's declared inputs"),
    (["hf:nosuch_arch"], "unknown architecture 'nosuch_arch'"),
    (["hf:bert,num_hidden_layerz=2"], "has no field 'num_hidden_layerz'"),
    (["hf:bert,num_hidden_layers=1", "--task", "generate"], "not task generate"),
    (["hf:gpt2,n_layer=1,n_positions=16", "--task", "generate", "--prompt-len", "12"],
     "a prompt of 12 tokens and 16 new ones need 28 positions, over the model's context of 16"),
    (["dlperf:gpt2-tiny", "--task", "generate", "--prompt-len", "120", "--new-tokens", "9"],
     "need 129 positions, over the model's context of 128"),
    (["hf:bert,num_hidden_layers=abc"], "num_hidden_layers is a count or size: a positive integer, not 'abc'"),
    (["hf:bert,layer_norm_eps=abc"], "hf:bert,layer_norm_eps=abc: layer_norm_eps cannot be 'abc' ("),
    (["hf:bert,num_hidden_layers=-1"], "hf:bert,num_hidden_layers=-1: num_hidden_layers is a count or size: a "
                                       "positive integer, not -1"),
    (["hf:gpt2,n_head=0"], "n_head is a count or size: a positive integer, not 0"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--framework", "jax"], "jax runs dlperf's own models only"),
    (["dlperf:lenet5", "--framework", "jax"], "dlperf has no JAX CNN"),
    (["dlperf:mlp-small", "--framework", "tensorflow", "--precision", "int8"], "no tensorflow int8 quantizer"),
    (["dlperf:mlp-small", "--framework", "tensorflow-xla"], "not as framework tensorflow-xla: --framework tensorflow"),
    (["dlperf:gpt2-tiny", "--framework", "jax-nojit", "--variant", "no-jit"], "not as framework jax-nojit"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--precision", "fp16"],
     "fp16 (autocast float16) runs on CUDA only, not on cpu"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--precision", "int8", "--task", "train"],
     "int8 runs task infer only here"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--framework", "onnxruntime", "--framework", "openvino",
      "--precision", "bf16"], "onnxruntime runs fp32 or int8 here, not bf16"),
    (["{d}/models.py:net", "--input", "x:float32[B,8]", "--framework", "onnxruntime", "--task", "train"],
     "onnxruntime is an inference runtime"),
])
def test_a_bad_source_is_one_line_and_no_store(user_files: Path, tmp_path: Path, args: list[str],
                                               fragment: str, dlperf_main, preflight_in_this_process) -> None:
    """In this process (`dlperf.cli.main`, as the command line calls it), the preflight's check too (`check.main`,
    what its fresh process runs): 15 subprocesses importing torch and transformers took most of this file's time;
    the test below, and every bench run of this file, check the same path in a user's subprocess."""
    db = tmp_path / "s.db"
    res = dlperf_main("bench", *(a.format(d=user_files) for a in args), "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, fragment)
    assert not db.exists()


def test_a_source_that_raises_on_import_is_one_line_in_a_users_process(user_files: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    res = run_cli("bench", f"{user_files}/raises.py:net", "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, "importing it raised RuntimeError: broken on import")
    assert not db.exists()


#: A sitecustomize that makes `import transformers` fail in every process started with it on PYTHONPATH, as where
#: the hf extra is not installed.
NO_TRANSFORMERS = '''
import sys

class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "transformers" or name.startswith("transformers."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.modules.pop("transformers", None)
sys.meta_path.insert(0, _Absent())
'''


def test_an_hf_source_without_transformers_is_one_line_and_no_store(tmp_path: Path, dlperf_main,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_TRANSFORMERS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", str(REPO / "src"))]))
    db = tmp_path / "s.db"
    res = dlperf_main("bench", "hf:bert,num_hidden_layers=1", "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, "hf:bert,num_hidden_layers=1: transformers is not installed (pip install "
                               "'dlperf[hf]')")
    assert not db.exists()


def _metrics(db: Path) -> dict[tuple[str, int], dict]:
    with sqlite3.connect(db) as con:
        rows = con.execute("select framework, case_key, metrics from results").fetchall()
    return {(fw, int(key.split("batch=")[1].split(",")[0])): json.loads(m) for fw, key, m in rows}


def _gates(db: Path) -> dict[tuple[str, int], dict]:
    return {k: m["correctness"] for k, m in _metrics(db).items()}


def test_an_onnx_file_runs_on_both_runtimes_against_onnxruntimes_reference(user_files: Path, tmp_path: Path,
                                                                         dlperf_main) -> None:
    db = tmp_path / "o.db"
    res = dlperf_main("bench", f"{user_files}/tiny.onnx", "--seq", "3", "--batch", "1", "--batch", "2", "--budget",
                      "0.2", "--db", str(db))
    assert res.returncode == 0, res.stderr
    metrics = _metrics(db)
    assert set(metrics) == {(fw, b) for fw in ("onnxruntime", "openvino") for b in (1, 2)}
    for (_, batch), m in metrics.items():
        assert m["correctness"]["status"] == "pass", m["correctness"]
        assert m["correctness"]["rel_err"] <= 1e-4
        assert m["param_count"] == 32 and m["model_info"]["inputs"] == {"x": [batch, 3, 8]}
        assert "onnxruntime" in m["reference"] and "optimisations off" in m["reference"]
    assert "has no torch reference; each path is checked against onnxruntime" in " ".join(res.stdout.split())


def test_nondeterministic_and_failing_paths(user_files: Path, tmp_path: Path, dlperf_main) -> None:
    db = tmp_path / "g.db"
    res = dlperf_main("bench", f"{user_files}/models.py:Noisy", "--input", "x:float32[B,8]", "--budget", "0.2",
                      "--db", str(db))
    assert res.returncode == 0, res.stderr
    assert _gates(db)[("torch", 1)]["status"] == "nondeterministic"
    res = dlperf_main("bench", f"{user_files}/models.py:Exported", "--input", "x:float32[B,8]", "--budget", "0.2",
                      "--framework", "torch", "--framework", "onnxruntime", "--db", str(db), "--new")
    assert res.returncode == 0, res.stderr
    verdict = _gates(db)[("onnxruntime", 1)]
    assert verdict["status"] == "fail" and verdict["max_abs_err"] == pytest.approx(1.0, rel=1e-4)
    assert "FAIL: not comparable" in res.stdout and "its speed is not a speed-up" in res.stdout
    # the ratio column is a time ratio, the inverse of a speed-up: its note says which way is faster
    assert "a time ratio: below 1.00x is faster" in " ".join(res.stdout.split())


def test_the_example_passes_on_torch_and_both_runtimes(tmp_path: Path, dlperf_main) -> None:
    db = tmp_path / "e.db"
    res = dlperf_main("bench", f"{REPO}/examples/mlp.py:build", "--input", "x:float32[B,256]", "--framework",
                      "torch", "--framework", "onnxruntime", "--framework", "openvino", "--batch", "1", "--batch", "32",
                      "--budget", "0.3", "--db", str(db))
    assert res.returncode == 0, res.stderr
    gates = _gates(db)
    assert len(gates) == 6
    assert {v["status"] for (fw, _), v in gates.items() if fw != "torch"} == {"pass"}
    assert {v["status"] for (fw, _), v in gates.items() if fw == "torch"} == {"reference"}
    table = [line for line in res.stdout.splitlines() if line.startswith("│ onnxruntime") or
             line.startswith("│ openvino")]
    assert len(table) >= 4 and all("x (" in line and "pass" in line for line in table[-4:])


STUDY = """name: mine
description: a user's model in a study file
workload: model
frameworks: [torch, onnxruntime]
devices: [cpu]
params:
  source: {source}
  input: [["x:float32[B,8]"]]
  batch: [1, 4]
  task: {task}
"""


@pytest.mark.parametrize("name, task, fragment", [
    ("models.py:net", "infer", None),
    ("nothere.py:net", "infer", "params.source: {d}/nothere.py:net: no such file"),
    ("models.py:net", "fly", "params.task: Input should be 'infer', 'train' or 'generate'"),
])
def test_plan_on_a_study_file_of_a_source(user_files: Path, tmp_path: Path, name: str, task: str,
                                          fragment: str | None, dlperf_main) -> None:
    """In this process (`dlperf.cli.main`, as the command line calls it, with its exit code and output): plan
    starts no worker, so a subprocess only added a Python and dlperf's imports to each case."""
    study = tmp_path / "mine.yaml"
    study.write_text(STUDY.format(source=f"{user_files}/{name}", task=task))
    res = dlperf_main("plan", str(study), "--format", "json", "--db", str(tmp_path / "p.db"))
    assert not (tmp_path / "p.db").exists()  # plan runs nothing and writes nothing
    if fragment is not None:
        assert res.returncode == 2
        assert_one_line_error(res, fragment.format(d=user_files))
        return
    assert res.returncode == 0, res.stderr
    cases = json.loads(res.stdout)["rows"]
    assert sorted((c["framework"], c["params"]["batch"]) for c in cases) == [
        ("onnxruntime", 1), ("onnxruntime", 4), ("torch", 1), ("torch", 4)]
    assert all(c["workload"] == "model" and c["params"]["source"] == f"{user_files}/{name}" for c in cases)


def test_bench_help_says_what_each_option_does(dlperf_main) -> None:
    """`dlperf bench --help` as a new user reads it: every option has its own words, and --framework names every
    framework bench runs (TensorFlow and JAX run dlperf's own models)."""
    import click

    from dlperf.cli.bench import bench

    bare = [p.opts[0] for p in bench.params if isinstance(p, click.Option) and not p.help]
    assert bare == []
    res = dlperf_main("bench", "--help")
    assert res.returncode == 0
    framework = next(p for p in bench.params if p.name == "frameworks")
    assert isinstance(framework, click.Option) and framework.help is not None
    assert {"torch", "onnxruntime", "openvino", "tensorflow", "jax"} <= set(framework.help.replace(",", " ").split())
    assert "--repetitions" in res.stdout and "own process" in " ".join(res.stdout.split())


def test_generate_shows_tokens_per_second_and_its_first_token_and_per_token_times(tmp_path: Path,
                                                                                  dlperf_main) -> None:
    """A generate case's samples are its new tokens: the table says tokens/s, and the time to the first token
    and per output token, measured and stored with the case, are printed beside it (the same stored figures)."""
    db = tmp_path / "g.db"
    res = dlperf_main("bench", "dlperf:gpt2-tiny", "--task", "generate", "--prompt-len", "8", "--new-tokens", "4",
                      "--budget", "0.2", "--db", str(db))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    header = next(ln for ln in res.stdout.splitlines() if "vs reference" in ln and "batch" in ln)
    assert "tokens/s" in header and "samples/s" not in header
    m = _metrics(db)[("torch", 1)]  # the worker's own figures of its one process: p50 and its 95% interval
    from dlperf.report.transformer_report import _ci

    assert m["ttft_p50_ci95_low_s"] <= m["ttft_p50_s"] <= m["ttft_p50_ci95_high_s"]
    assert (f"torch cpu fp32 batch 1: time to first token {_ci(m, 'ttft_p50')}, per output token "
            f"{_ci(m, 'tpot_p50')}") in text
    assert "[" in _ci(m, "ttft_p50") and "n too small" not in _ci(m, "ttft_p50")  # an interval, not a bare p50
