"""`dlperf recommend --model SOURCE`: a user's module (written here) gets labelled estimates of its training step,
FLOPs equal to torch's own count of the same step built here; FLOPs that cannot be extrapolated say why and rank
nothing; a bad source is one `dlperf: error:` line, exit 2 and no store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import assert_one_line_error, user_model_files
from tests.conftest import torch_counted_flops

MODELS = '''
import torch
from torch import nn

def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

class Gram(nn.Module):
    """A B x B product: its FLOPs grow with the square of the batch."""
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
    def forward(self, x):
        h = self.lin(x)
        return (h @ h.T).sum(dim=1, keepdim=True)
'''


@pytest.fixture(scope="module")
def user_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return user_model_files(tmp_path_factory.mktemp("user"), MODELS, "net.onnx",
                            b"not read: an ONNX file is refused before")


def test_a_source_gets_estimates_of_its_step_with_torchs_flop_count(user_files: Path, tmp_path: Path,
                                                                     dlperf_main) -> None:
    import torch
    from torch import nn

    db = tmp_path / "none.db"
    res = dlperf_main("recommend", "--model", f"{user_files}/models.py:mlp", "--input", "x:float32[B,8]", "--batch",
                      "16", "--format", "json", "--db", str(db))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    costs = out["request"]["costs"]
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    expected = torch_counted_flops(lambda: net(torch.randn(16, 8)).pow(2).mean().backward())
    assert out["estimate"] is True and costs["flops"] == expected
    assert costs["params"] == 8 * 16 + 16 + 16 * 2 + 2 and costs["params_bytes"] == 4 * costs["params"]
    assert costs["input_bytes"] == 16 * 8 * 4
    assert out["ranked"] and all(e["estimate"]["images_per_s"] > 0 for e in out["ranked"])
    assert not db.exists()  # estimates read no store and create none
    res = dlperf_main("recommend", "--model", f"{user_files}/models.py:mlp", "--input", "x:float32[B,8]", "--batch",
                      "16", "--no-plot", "--db", str(db))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    for label in ("ESTIMATES for", "est. FLOPs per step", "est. memory, CPU process", "est. memory, GPU allocator",
                  "est. traffic per step", "est. samples/s", "every figure above is an estimate",
                  "not checked against measurements here"):
        assert label in text, label


def test_flops_that_cannot_be_extrapolated_say_why_and_rank_nothing(user_files: Path, tmp_path: Path,
                                                                    dlperf_main) -> None:
    res = dlperf_main("recommend", "--model", f"{user_files}/models.py:Gram", "--input", "x:float32[B,8]",
                      "--batch", "64", "--no-plot", "--db", str(tmp_path / "none.db"))
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "est. FLOPs per step │ not estimated │ not estimated: not linear in the batch" in text
    assert "no device qualifies" in text and "(FLOPs not estimated: not linear in the batch" in text


#: A BERT small enough to count in seconds: every override is a config field, so a typo is an error, not a default.
TINY_BERT = "hf:bert,num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,vocab_size=128"


def test_an_hf_architecture_gets_estimates_with_the_configs_parameters(tmp_path: Path, dlperf_main) -> None:
    """`recommend --model hf:ARCH,...` prints its estimates: the config built with random weights in a fresh
    process and counted; its parameters are those of the same config built here, and its FLOPs torch's count
    of the same step at the same batch (FLOPs are linear in the batch, so 1, 2 and 4 give 8 exactly)."""
    transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import torch

    db = tmp_path / "none.db"
    res = dlperf_main("recommend", "--model", TINY_BERT, "--seq", "16", "--batch", "8", "--top", "3", "--no-plot",
                      "--db", str(db))
    assert res.returncode == 0, res.stderr
    overrides = {k: int(v) for k, v in (kv.split("=") for kv in TINY_BERT.split(",")[1:])}
    built = transformers.AutoModel.from_config(transformers.AutoConfig.for_model("bert", **overrides))
    ids = torch.randint(0, 128, (8, 16))
    flops = torch_counted_flops(lambda: built(input_ids=ids, attention_mask=torch.ones_like(ids))
                                .last_hidden_state.pow(2).mean().backward())
    text = " ".join(res.stdout.split())
    for label in (f"ESTIMATES for {TINY_BERT} training step, batch 8, fp32", f"{TINY_BERT}'s costs",
                  f"parameters │ {sum(p.numel() for p in built.parameters()):,} │",
                  f"est. FLOPs per step │ {flops:.4g} │",
                  "est. inputs │ 2 KiB │",  # input_ids and attention_mask, [8, 16] int64 each
                  "est. samples/s", "every figure above is an estimate", "not checked against measurements here"):
        assert label in text, label
    assert not db.exists()  # estimates read no store and create none


@pytest.mark.parametrize("args, fragment", [
    (["--model", "{d}/nothere.py:net"], "no such file"),
    (["--model", "{d}/raises.py:net"], "importing it raised RuntimeError: broken on import"),
    (["--model", "{d}/models.py:mlp", "--input", "x:float32[B,5]"], "models.py:mlp: counting a training step raised"),
    (["--model", "{d}/models.py:mlp"], "give its inputs"),
    (["--model", "{d}/net.onnx"], "an ONNX file has no training step"),
    (["--model", "{d}/models.py:mlp", "--workload", "cnn:alexnet"], "give one of --workload"),
    (["--workload", "cnn:alexnet", "--input", "x:float32[B,8]"], "are for --model SOURCE"),
])
def test_a_bad_source_is_one_line_and_no_store(user_files: Path, tmp_path: Path, args: list[str], fragment: str,
                                               dlperf_main) -> None:
    db = tmp_path / "s.db"
    res = dlperf_main("recommend", *(a.format(d=user_files) for a in args), "--db", str(db))
    assert res.returncode == 2
    assert_one_line_error(res, fragment)
    assert not db.exists()
