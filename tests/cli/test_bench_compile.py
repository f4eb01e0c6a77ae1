"""`dlperf bench --variant`: torch compiler variants against eager.

One bench run (module scope: inductor compiles on 2 cores take seconds each) of a tiny module with a `print` in
its forward, eager and `compile` twice each, is read by several tests: the warm compile hits the cold one's
cache (that it is faster is a speed target, judged by a ratio in benchmarks/inductor_warm_compile.py, not by a
timed test); the two cold compiles had caches of their own; the graph break is counted with its reason;
the compiled path is gated and reported against eager. In this process: the gate on a compiled path that
computes something else, a variant that cannot run here (unsupported, with the reason), and the errors of the
options before anything runs."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import assert_one_line_error, variant_of
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
'''
PRINT_LINE = 13  # the line of `print` in MODELS


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("compile-user")
    (folder / "models.py").write_text(MODELS)
    return folder


@pytest.fixture(scope="module")
def bench_run(user_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, list[dict]]]]:
    """(the CLI result, variant -> each repetition's (status, reason, metrics)); eager is not asked for: it runs
    as the reference of any compiler variant. TMPDIR is a folder of this test's (removed after): the compile
    caches' folders and torch's own precompiled headers (`$TMPDIR/torchinductor_$USER`) are made there."""
    db = tmp_path_factory.mktemp("compile-db") / "c.db"
    tmp = tmp_path_factory.mktemp("compile-tmp")
    res = run_cli("bench", f"{user_dir}/models.py:Breaks", "--input", "x:float32[B,16]",  # eager comes along
                  "--variant", "compile", "--repetitions", "2",
                  "--budget", "0.2", "--db", str(db), timeout=900, env={"TMPDIR": str(tmp)})
    left = sorted(p.name for p in tmp.glob("dlperf-compile-*"))  # a worker's cache folder goes with it
    shutil.rmtree(tmp, ignore_errors=True)  # torch's precompiled headers: over 100 MB
    assert res.returncode == 0, res.stderr
    assert not left, left
    with sqlite3.connect(db) as con:
        rows = con.execute("select case_key, repetition, status, reason, metrics from results").fetchall()
    by: dict[str, list[dict]] = {}
    for key, _rep, status, reason, metrics in sorted(rows, key=lambda r: r[1]):
        variant = variant_of(key)
        by.setdefault(variant, []).append({"status": status, "reason": reason,
                                           "metrics": json.loads(metrics) if metrics else {}})
    yield res, by


def test_the_warm_compile_uses_the_cold_ones_cache(bench_run) -> None:
    _, by = bench_run
    assert [r["status"] for r in by["compile"]] == ["ok", "ok"]
    for rep in by["compile"]:
        record = rep["metrics"]["compile"]
        assert record["cold_counters"].get("fxgraph_cache_miss", 0) >= 1
        assert record["cold_counters"].get("fxgraph_cache_hit", 0) == 0
        assert record["warm_counters"].get("fxgraph_cache_hit", 0) >= 1, record["warm_counters"]
        assert record["warm_counters"].get("fxgraph_cache_miss", 0) == 0
        assert record["warm_cache_files_before"] == record["cold_cache_files_after"] > 0
        assert record["cold_s"] > 0 and record["warm_s"] > 0, record  # both timed (how they compare: the benchmark)


def test_two_cold_compiles_do_not_share_a_cache(bench_run) -> None:
    _, by = bench_run
    first, second = (rep["metrics"]["compile"] for rep in by["compile"])
    assert first["cache_dir"] != second["cache_dir"]
    assert first["cold_cache_files_before"] == second["cold_cache_files_before"] == 0
    # the second cold compile of the same case hit nothing: the first one's cache was not its own
    assert second["cold_counters"].get("fxgraph_cache_hit", 0) == 0
    assert Path(first["cache_dir"]).name.startswith("dlperf-compile-")  # in $TMPDIR, removed with its worker
    # torch's precompiled headers are not a per-model cache: the first cold compile built them, the second found them
    assert (first["headers"], second["headers"]) == ("built by the cold compile",
                                                     "found (torch keeps them for every model)")


def test_a_graph_break_is_counted_with_its_reason(bench_run) -> None:
    res, by = bench_run
    record = by["compile"][0]["metrics"]["compile"]
    assert record["graph_breaks"] == 1 and record["graphs"] == 2
    (brk,) = record["break_reasons"]
    assert "print" in brk["reason"] and brk["where"].endswith(f"models.py:{PRINT_LINE} in forward")
    assert "graph break at" in res.stdout and "1 (2 graphs)" in res.stdout


def test_the_compiled_path_is_gated_and_reported_against_eager(bench_run) -> None:
    res, by = bench_run
    assert {rep["metrics"]["correctness"]["status"] for rep in by["compile"]} == {"pass"}
    assert {rep["metrics"]["correctness"]["status"] for rep in by["eager"]} == {"reference"}
    row = next(line for line in res.stdout.splitlines() if line.startswith("│ compile "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[3].endswith(")") and ("x (" in cells[3] or cells[3].startswith("- (")), cells
    assert cells[4].endswith(" s") and cells[5].endswith(" s")  # cold and warm compile times
    if cells[3].startswith("- ("):  # no ratio: the reason is said
        assert "compile: no speed-up:" in " ".join(res.stdout.split())


@pytest.mark.parametrize("args, fragment", [
    (["--variant", "tensorrt"], "unknown variant 'tensorrt' (known: eager, compile, "
                                "compile:max-autotune-no-cudagraphs, compile:reduce-overhead, export, ort:none, "
                                "ort:basic, ort:all, ov:latency, ov:throughput, graph, xla, jit; no-jit is eager)"),
    (["--variant", "jit"], "variant jit is a jax mode; torch runs eager and its own variants only (add --framework "
                           "jax)"),
    (["--variant", "compile", "--framework", "onnxruntime"], "variant compile is a torch compiler; onnxruntime "
                                                             "runs eager and its own variants only (add --framework "
                                                             "torch)"),
    (["--variant", "ort:basic"], "variant ort:basic is an onnxruntime setting; torch runs eager and its own variants "
                                 "only (add --framework onnxruntime)"),
    (["--variant", "export", "--framework", "onnxruntime", "--framework", "openvino"],
     "variant export is a torch compiler; onnxruntime, openvino run eager and their own variants only (add "
     "--framework torch)"),
])
def test_a_bad_variant_is_one_line_before_anything_runs(user_dir: Path, tmp_path: Path, dlperf_main,
                                                        args: list[str], fragment: str) -> None:
    db = tmp_path / "s.db"
    res = dlperf_main("bench", f"{user_dir}/models.py:Breaks", "--input", "x:float32[B,16]", *args,
                      "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, fragment)
    assert not db.exists()


def test_a_compiled_path_that_computes_something_else_fails_the_gate(user_dir: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process, with a stand-in for the compiler that adds 1 to the module's output (test-only: no
    inductor compile here), the caches' folder the test's own, the warm process left out."""
    from dlperf.frameworks import get_framework
    from dlperf.workloads import get_workload
    from dlperf.workloads.model import torch_compiled

    def off_by_one(torch: Any, net: Any, *_: Any) -> Any:  # in place of `torch_compiled.compiled`
        return lambda *a, **k: net(*a, **k) + 1.0

    for name in torch_compiled.cache_env(tmp_path):
        monkeypatch.setenv(name, "unset")  # put back after the test (the builder sets them)
    monkeypatch.setattr(torch_compiled, "cache_folder", lambda: tmp_path)
    monkeypatch.setattr(torch_compiled, "compiled", off_by_one)
    monkeypatch.setattr(torch_compiled, "warm", lambda *a: {"warm_error": "not run in this test"})
    fw = get_framework("torch")
    fw.import_module()
    workload = get_workload("model")
    params = workload.parse({"source": f"{user_dir}/models.py:Breaks", "input": ["x:float32[B,16]"],
                             "variant": "compile"})
    step = workload.build(fw, "cpu", params)
    step.fn()
    verdict = workload.extra_metrics(params, step)["correctness"]
    assert verdict["status"] == "fail" and verdict["max_abs_err"] == pytest.approx(1.0, rel=1e-4)


@pytest.mark.parametrize("variant, device, reason", [
    ("compile:reduce-overhead", "cpu", "variant compile:reduce-overhead records CUDA graphs: CUDA only, not cpu"),
    ("export", "cpu", "variant export runs task infer only, not train: torch.export captures a forward for "
                      "AOTInductor; an exported training step is not what dlperf builds"),
])
def test_a_variant_that_cannot_run_here_is_unsupported_with_the_reason(variant: str, device: str,
                                                                        reason: str) -> None:
    from dlperf.frameworks import UnsupportedError, get_framework
    from dlperf.workloads import get_workload

    fw = get_framework("torch")
    fw.import_module()
    workload = get_workload("model")
    task = "train" if "train" in reason else "infer"
    params = workload.parse({"source": "dlperf:lenet5", "variant": variant, "task": task})
    with pytest.raises(UnsupportedError) as caught:
        workload.build(fw, device, params)
    assert str(caught.value) == reason
