"""The model workload's correctness gate and the sources' text checks, on plain arrays and strings."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.sources import SourceError, kind_of
from dlperf.sources.hf_source import parse
from dlperf.sources.inputs import parse_input
from dlperf.workloads.model import gate


def test_a_reference_that_differs_from_itself_is_nondeterministic() -> None:
    a = [np.ones((2, 3))]
    assert gate.self_check(a, [np.ones((2, 3))]) is None
    verdict = gate.self_check(a, [np.ones((2, 3)) + 1e-3])
    assert verdict is not None and verdict["status"] == "nondeterministic"


def test_a_perturbed_output_fails_with_where_and_a_close_one_passes() -> None:
    ref = [np.arange(12, dtype=float).reshape(3, 4)]
    assert gate.judge([ref[0] + 1e-7], ref, "fp32")["status"] == "pass"
    bad = ref[0].copy()
    bad[2, 1] += 0.5
    verdict = gate.judge([bad], ref, "fp32")
    assert verdict["status"] == "fail" and verdict["index"] == [2, 1] and verdict["max_abs_err"] == pytest.approx(0.5)
    assert gate.judge([bad], ref, "bf16")["status"] == "pass"  # 0.5 / 11 is within bf16's 5e-2
    assert gate.judge([ref[0][:2]], ref, "fp32")["status"] == "fail"  # another shape


def test_top1_must_agree_where_the_reference_is_clear() -> None:
    ref = [np.array([[0.0, 10.0, 0.0], [5.0, 5.0, 0.0]])]
    swapped = [np.array([[0.0, 10.0, 0.0], [5.0, 5.0 - 1e-5, 0.0]])]  # a tie in the reference: not judged
    assert gate.judge(swapped, ref, "bf16")["status"] == "pass"
    wrong = [np.array([[0.0, 9.0, 9.6], [5.0, 5.0, 0.0]])]
    assert gate.judge(wrong, ref, "bf16")["status"] == "fail"


def test_source_kinds_and_their_text_errors(tmp_path) -> None:
    assert kind_of("dlperf:alexnet").name == "dlperf"
    assert kind_of("hf:bert,num_hidden_layers=2").name == "hf"
    assert kind_of("pkg.mod:Net").name == "module"
    assert kind_of("a/b.py:build").name == "file"
    assert parse("hf:llama,num_hidden_layers=2,hidden_size=256,tie_word_embeddings=false") == (
        "llama", {"num_hidden_layers": 2, "hidden_size": 256, "tie_word_embeddings": False})
    for bad in ("nothing", "hf:bert,layers", str(tmp_path / "missing.py") + ":build", "dlperf:nosuch"):
        with pytest.raises(SourceError):
            kind_of(bad).check_text(bad)
    spec = parse_input("ids:int64[B,S]<50257")
    assert spec.shape(4, 16) == (4, 16) and spec.high == 50257
    for bad in ("x", "x:float99[B]", "x:float32[B,0]", "x:float32[B,Q]"):
        with pytest.raises(SourceError):
            parse_input(bad)


def test_a_check_that_runs_out_of_memory_after_the_timing_leaves_the_case_timed_and_not_checked() -> None:
    """Under a memory cap the gate's float64 copies may not fit where the timed path did: the case keeps its
    timing (no `oom` status from the check) and says why it was not checked; other errors still propagate."""
    from dlperf.workloads.model import Model, ModelParams
    from dlperf.workloads.model.step import ModelStep

    def no_room() -> dict:
        raise MemoryError("Unable to allocate 91.6 MiB")

    p = ModelParams(source="dlperf:lenet5")
    info = Model().extra_metrics(p, ModelStep(lambda: None, lambda: None, info={"gate": no_room, "param_count": 3}))
    assert info["param_count"] == 3
    assert info["correctness"]["status"] == "not checked" and "ran out of memory" in info["correctness"]["reason"]

    def broken() -> dict:
        raise ValueError("a bug in the check")

    with pytest.raises(ValueError):
        Model().extra_metrics(p, ModelStep(lambda: None, lambda: None, info={"gate": broken}))


def test_a_file_or_folder_spelled_two_ways_is_one_source(tmp_path, monkeypatch) -> None:
    """Below the working directory a path is spelled relative and normalised, elsewhere absolute; an
    architecture's name, a module and dlperf's own names are left as given."""
    from dlperf.sources import canonical

    (tmp_path / "work" / "cfg").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    here, away = tmp_path / "work", tmp_path / "elsewhere"
    assert canonical("./m.onnx") == canonical(f"{here}/sub/../m.onnx") == "m.onnx"
    assert canonical("../elsewhere/m.onnx") == canonical(f"{away}/m.onnx") == f"{away}/m.onnx"
    assert canonical("./nets/../net.py:build") == "net.py:build"
    assert canonical(f"hf:{here}/cfg,hidden_size=64") == canonical("hf:./cfg,hidden_size=64") == \
        "hf:./cfg,hidden_size=64"
    for same in ("hf:bert,num_hidden_layers=2", "dlperf:lenet5", "examples.mlp:build"):
        assert canonical(same) == same


def test_a_source_below_a_symlinked_working_folder_is_one_source(tmp_path, monkeypatch) -> None:
    """The working folder reached through a link: `./m.onnx` and the link's absolute spelling are one source, and
    `link/../m.onnx` is the file the system opens (beside the link's target), not a text-collapsed `m.onnx`."""
    from dlperf.sources import canonical

    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "work").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "link").symlink_to(tmp_path / "real" / "deep")
    monkeypatch.chdir(tmp_path / "work")
    assert canonical("./m.onnx") == canonical(f"{tmp_path}/work/m.onnx") == "m.onnx"
    assert canonical("link/../m.onnx") == "m.onnx"  # real/deep/.. is real: the file below the working folder
    (tmp_path / "real" / "deep" / "link2").symlink_to(tmp_path / "elsewhere")
    assert canonical("deep/link2/../m.onnx") == f"{tmp_path}/m.onnx"  # the link's parent, not deep/
