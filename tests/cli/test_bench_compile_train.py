"""`dlperf bench --task train --variant compile`: torch.compile of a training step, against eager's.

One bench run (module scope: inductor compiles a forward and a backward, seconds each on 2 cores) of a tiny
module with a `print` in its forward, eager and `compile`, is read by the first tests: cold and warm compile
recorded as for infer, the graph break counted, the compiled step gated against one eager step and reported. In
this process, with stand-ins for the compiler (no inductor compile): a step that computes something else fails
the gate, one that computes the same passes; export and generate stay unsupported with their reasons."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import variant_of
from tests.conftest import run_cli

MODELS = '''
import torch
from torch import nn

class Breaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.a(x))
        print("a graph break on purpose")
        return self.b(h)

class Drops(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.a(x))
'''
SOURCE_ARGS = ("--input", "x:float32[B,16]")


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compile-train-user")
    (folder / "models.py").write_text(MODELS)
    return folder


@pytest.fixture(scope="module")
def bench_run(user_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, dict]]]:
    """(the CLI result, variant -> its one repetition's status, reason and metrics); TMPDIR is this test's."""
    db = tmp_path_factory.mktemp("compile-train-db") / "c.db"
    tmp = tmp_path_factory.mktemp("compile-train-tmp")
    res = run_cli("bench", f"{user_dir}/models.py:Breaks", *SOURCE_ARGS, "--task", "train", "--variant", "compile",
                  "--budget", "0.2", "--db", str(db), timeout=900, env={"TMPDIR": str(tmp)})
    shutil.rmtree(tmp, ignore_errors=True)  # torch's precompiled headers: over 100 MB
    assert res.returncode == 0, res.stderr
    with sqlite3.connect(db) as con:
        rows = con.execute("select case_key, status, reason, metrics from results").fetchall()
    by = {variant_of(key): {"status": status, "reason": reason, "metrics": json.loads(metrics) if metrics else {}}
          for key, status, reason, metrics in rows}
    yield res, by


def test_a_compiled_training_step_records_its_cold_and_warm_compile(bench_run) -> None:
    _, by = bench_run
    assert by["compile"]["status"] == "ok", by["compile"]["reason"]
    record = by["compile"]["metrics"]["compile"]
    # the cold step compiled the forward and the backward (AOTAutograd) into the case's own, empty cache
    assert record["cold_cache_files_before"] == 0
    assert record["cold_counters"].get("fxgraph_cache_miss", 0) >= 2, record["cold_counters"]
    assert record["cold_counters"].get("fxgraph_cache_hit", 0) == 0
    # the warm process's step found them there
    assert "warm_error" not in record, record.get("warm_error")
    assert record["warm_counters"].get("fxgraph_cache_hit", 0) >= 2, record["warm_counters"]
    assert record["warm_counters"].get("fxgraph_cache_miss", 0) == 0
    assert record["warm_cache_files_before"] == record["cold_cache_files_after"] > 0
    assert record["graph_breaks"] == 1 and record["graphs"] == 2  # explain on the module's forward


def test_the_compiled_training_step_is_gated_against_eagers_and_reported(bench_run) -> None:
    res, by = bench_run
    verdict = by["compile"]["metrics"]["correctness"]
    assert verdict["status"] == "pass", verdict
    assert verdict["rel_err"] <= verdict["tolerance_rel"] == 1e-4
    assert by["eager"]["metrics"]["correctness"]["status"] == "not checked"
    m = by["compile"]["metrics"]
    assert m["flops_per_call"] == by["eager"]["metrics"]["flops_per_call"] > 0  # eager's step, counted alike
    row = next(line for line in res.stdout.splitlines() if line.startswith("│ compile "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[4].endswith(" s") and cells[5].endswith(" s")  # cold and warm compile times
    assert cells[-1] == "pass", cells


def _build(user_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stand_in: Any,
           model: str = "Breaks") -> dict[str, Any]:
    """The train/compile case built in this process with `stand_in` for `torch_compiled.compiled` (the caches'
    folder the test's own, no warm process), one timed-path step run; its correctness verdict."""
    from dlperf.frameworks import get_framework
    from dlperf.workloads import get_workload
    from dlperf.workloads.model import torch_compiled

    for name in torch_compiled.cache_env(tmp_path):
        monkeypatch.setenv(name, "unset")  # put back after the test (the builder sets them)
    monkeypatch.setattr(torch_compiled, "cache_folder", lambda: tmp_path)
    monkeypatch.setattr(torch_compiled, "compiled", stand_in)
    monkeypatch.setattr(torch_compiled, "warm", lambda *a: {"warm_error": "not run in this test"})
    fw = get_framework("torch")
    fw.import_module()
    workload = get_workload("model")
    params = workload.parse({"source": f"{user_dir}/models.py:{model}", "input": list(SOURCE_ARGS[1:]),
                             "task": "train", "variant": "compile"})
    step = workload.build(fw, "cpu", params)
    step.fn()
    return workload.extra_metrics(params, step)["correctness"]


def test_a_training_step_that_computes_something_else_fails_the_gate(user_dir: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # scaled, not shifted: a shift of every logit leaves the cross-entropy (and its gradients) as they were
    verdict = _build(user_dir, tmp_path, monkeypatch, lambda torch, net, *_: lambda *a, **k: net(*a, **k) * 1.5)
    assert verdict["status"] == "fail", verdict
    assert verdict["tensor"] == "loss" and verdict["reason"].startswith("loss: ")


def test_a_training_step_with_other_gradients_fails_the_gate(user_dir: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The same loss, the backward doubled: only the gradients and the updated weights tell."""
    def doubled_backward(torch: Any, net: Any, *_: Any) -> Any:
        def forward(*a: Any, **k: Any) -> Any:
            out = net(*a, **k)
            return 2 * out - out.detach()  # the value of `out`, twice its gradient

        return forward

    verdict = _build(user_dir, tmp_path, monkeypatch, doubled_backward)
    assert verdict["rel_err"] > 0 and verdict.get("output", 0) > 0, verdict  # the loss itself agreed
    assert verdict["status"] == "fail", verdict
    assert verdict["tensor"].startswith("grad "), verdict


def test_a_training_step_that_computes_the_same_passes_the_gate(user_dir: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = _build(user_dir, tmp_path, monkeypatch, lambda torch, net, *_: net)
    assert verdict["status"] == "pass", verdict
    assert verdict["rel_err"] == 0.0  # the module itself: the same kernels in the same order as eager's step


def test_a_training_step_with_dropout_is_nondeterministic_not_judged(user_dir: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropout in train mode: eager's step differs from itself (its forward in eval mode does not)."""
    verdict = _build(user_dir, tmp_path, monkeypatch, lambda torch, net, *_: net, model="Drops")
    assert verdict["status"] == "nondeterministic", verdict
    assert "eager's training step differs from itself" in verdict["reason"]


@pytest.mark.parametrize("variant, task, reason", [
    ("export", "train", "variant export runs task infer only, not train: torch.export captures a forward for "
                        "AOTInductor; an exported training step is not what dlperf builds"),
    ("compile", "generate", "variant compile runs tasks infer and train, not generate: dlperf compiles a forward or "
                            "a training step, not a decoding loop whose KV cache grows every token"),
])
def test_export_of_a_training_step_and_compiled_generation_are_unsupported(variant: str, task: str,
                                                                           reason: str) -> None:
    from dlperf.frameworks import UnsupportedError, get_framework
    from dlperf.workloads import get_workload

    fw = get_framework("torch")
    fw.import_module()
    workload = get_workload("model")
    params = workload.parse({"source": "dlperf:gpt2-tiny", "variant": variant, "task": task})
    with pytest.raises(UnsupportedError) as caught:
        workload.build(fw, "cpu", params)
    assert str(caught.value) == reason
