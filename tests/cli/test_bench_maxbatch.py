"""`dlperf maxbatch SOURCE`: a user's module (written here) searched along its batch under a memory cap, each probe
stored; a bad source is one `dlperf: error:` line, exit 2 and no store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import assert_one_line_error, user_model_files
from tests.conftest import run_cli

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


def test_a_source_is_searched_to_the_batch_that_fits_under_the_cap(user_files: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    res = run_cli("maxbatch", f"{user_files}/models.py:Big", "--input", "x:float32[B,80000000]", "--mem-limit",
                  "800MiB", "--max-batch", "4", "--plot-dir", str(tmp_path / "plots"), "--db", str(db), timeout=300)
    assert res.returncode == 0, res.stderr
    assert _probes(db) == {1: "ok", 2: "oom"}
    out = " ".join(res.stdout.split())
    assert "largest batch that fits under a 800 MiB cap: 1 (batch 2 ran out of memory)" in out
    assert f"probes of {user_files}/models.py:Big input=x:float32[B,80000000] task=train on torch cpu" in out


@pytest.mark.parametrize("args, fragment", [
    (["{d}/nothere.py:net"], "no such file"),
    (["{d}/models.py:nosuch", "--input", "x:float32[B,8]"], "no name 'nosuch'"),
    (["{d}/raises.py:net"], "importing it raised RuntimeError: broken on import"),
    (["{d}/models.py:not_a_module", "--input", "x:float32[B,8]"], "returned a int, not a torch.nn.Module"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,5]"], "the model rejects its inputs"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,8]", "--task", "generate"], "not task generate"),
    (["{d}/models.py:mlp", "--input", "x:float32[B,8]", "--framework", "tensorflow"], "no tensorflow implementation"),
    (["{d}/bad.onnx"], "bad.onnx: not a valid ONNX model"),
    (["lenet5", "--input", "x:float32[B,8]"], "--input is for a SOURCE target"),
    (["hf:nosuch_arch"], "unknown architecture 'nosuch_arch'"),
])
def test_a_bad_source_is_one_line_and_no_store(user_files: Path, tmp_path: Path, args: list[str], fragment: str,
                                               dlperf_main) -> None:
    db = tmp_path / "s.db"
    res = dlperf_main("maxbatch", *(a.format(d=user_files) for a in args), "--mem-limit", "1GiB", "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, fragment)
    assert not db.exists()
