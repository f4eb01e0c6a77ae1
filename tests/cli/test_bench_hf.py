"""Hugging Face sources with no network: every dlperf process of the run (CLI, check, workers) has sockets to
other hosts refused and logged by a sitecustomize on its path; the runs pass, nothing was tried, and the stored
parameter counts equal the same configs built directly here.

The inputs are small (BERT at 16 tokens, batches 1 and 2; GPT-2 with an 8-token prompt and 4 new tokens): neither
the network's use nor a config's parameter count depends on the sequence or the batch, and two batches still
make two workers whose counts must agree. The configs built here are built on torch's meta device: the same
modules and parameter shapes from transformers' own code, without filling 40-120 M random weights."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
NO_NETWORK = '''
import os, socket
_log = os.environ["DLPERF_TEST_SOCKET_LOG"]
_connect = socket.socket.connect
def _refuse(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        with open(_log, "a") as f:
            f.write(repr(address) + "\\n")
        raise OSError("network disabled by the test")
    return _connect(self, address)
socket.socket.connect = _refuse
'''


def _params(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        rows = con.execute("select framework, case_key, metrics from results").fetchall()
    return {key: json.loads(m).get("param_count") for _, key, m in rows}


@pytest.mark.parametrize("args, build", [
    (["hf:bert,num_hidden_layers=2", "--task", "infer", "--seq", "16", "--batch", "1", "--batch", "2"],
     lambda tf: tf.AutoModel.from_config(tf.AutoConfig.for_model("bert", num_hidden_layers=2))),
    (["hf:gpt2,n_layer=2", "--task", "generate", "--prompt-len", "8", "--new-tokens", "4"],
     lambda tf: tf.AutoModelForCausalLM.from_config(tf.AutoConfig.for_model("gpt2", n_layer=2))),
])
def test_hf_sources_run_offline_with_the_configs_parameters(tmp_path: Path, args: list[str], build) -> None:
    # in the test, not at collection: every test process collects every file, and only this one needs transformers
    transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_NETWORK)
    log = tmp_path / "sockets.log"
    db = tmp_path / "hf.db"
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", str(REPO / "src"))])
    res = run_cli("bench", *args, "--budget", "0.3", "--db", str(db), timeout=600,
                  env={"PYTHONPATH": path, "DLPERF_TEST_SOCKET_LOG": str(log)})
    assert res.returncode == 0, res.stderr
    assert not log.exists(), log.read_text()
    counts = _params(db)
    import torch

    with torch.device("meta"):  # shapes only: the count needs no weights' values
        expected = sum(p.numel() for p in build(transformers).parameters())
    assert counts and set(counts.values()) == {expected}
    assert "reference" in res.stdout
