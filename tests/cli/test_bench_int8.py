"""`dlperf bench --precision int8` as a user runs it: on onnxruntime and openvino a small MLP's int8 path passes the
gate within int8's bound, its error, top-1 agreement and what became int8 stored and printed beside its speed; a
torch int8 path that computes something else (the module's own quantized copy adds 1) fails and is not ranked."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from tests.conftest import run_cli

MODELS = '''
from torch import nn

class Skewed(nn.Module):
    """16 features, 10 classes; once its Linear layers are dynamically quantized (not nn.Linear any more) it adds 1:
    the int8 path computes something else. The runtimes quantize the exported fp32 graph, which does not."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x) + (0.0 if isinstance(self.net[0], nn.Linear) else 1.0)
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[tuple[str, str], dict]]:
    """One bench run: torch, onnxruntime and openvino at fp32 and int8, batch 4; (stdout, metrics by path)."""
    folder = tmp_path_factory.mktemp("int8")
    (folder / "models.py").write_text(MODELS)
    db = folder / "i.db"
    res = run_cli("bench", f"{folder}/models.py:Skewed", "--input", "x:float32[B,16]", "--batch", "4",
                  "--precision", "fp32", "--precision", "int8", "--framework", "torch", "--framework",
                  "onnxruntime", "--framework", "openvino", "--budget", "0.05", "--db", str(db), timeout=300)
    assert res.returncode == 0, res.stderr
    with sqlite3.connect(db) as con:
        rows = con.execute("select framework, case_key, metrics from results").fetchall()
    metrics = {(fw, "int8" if "precision=int8" in key else "fp32"): json.loads(m) for fw, key, m in rows}
    return res.stdout, metrics


def _model_row(stdout: str, fw: str) -> str:
    """The model table's int8 row of `fw` (framework, device, precision, batch, ...)."""
    return next(line for line in stdout.splitlines() if re.match(rf"│ {fw}\s+│ cpu\s+│\s+int8\s+│\s+4\s+│", line))


@pytest.mark.parametrize("fw, made", [("onnxruntime", "MatMulInteger in the graph"),
                                      ("openvino", "FullyConnected in u8")])
def test_runtime_int8_passes_within_its_bound_and_is_stored(run: tuple[str, dict], fw: str, made: str) -> None:
    stdout, metrics = run
    verdict = metrics[(fw, "int8")]["correctness"]
    assert verdict["status"] == "pass", verdict
    assert verdict["precision"] == "int8" and verdict["tolerance_rel"] == 0.1
    assert 1e-4 < verdict["rel_err"] <= 0.1 and verdict["top1_agreement"] == 1.0  # really int8, within the bound
    assert made in metrics[(fw, "int8")]["int8"]["executed"]
    row = _model_row(stdout, fw)
    assert f"pass (error {verdict['rel_err']:.2g}, top-1 100%)" in row and "x (" in row  # beside its speed-up
    assert f"int8: {fw} cpu int8 batch 4: " in " ".join(stdout.split())


def test_an_int8_path_that_computes_something_else_fails_and_is_not_ranked(run: tuple[str, dict]) -> None:
    stdout, metrics = run
    verdict = metrics[("torch", "int8")]["correctness"]
    assert verdict["status"] == "fail" and verdict["rel_err"] > 0.1, verdict
    assert metrics[("torch", "int8")]["int8"]["executed"] == "2 of 2 nn.Linear layers int8"
    row = _model_row(stdout, "torch")
    assert "FAIL: not comparable" in row and "fail [" in row
    assert "FAIL: torch computed something else than the reference" in " ".join(stdout.split())
