"""Study files: the shipped ones load; every kind of bad file is one line naming file, key and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf.errors import StudyError
from dlperf.studies import load_study, shipped_studies

GOOD = """
name: t
workload: ops
frameworks: [numpy, torch]
params:
  - {op: matmul, size_mb: [1, 2]}
  - {op: add, size_mb: 0.5}
repetitions: 2
quick:
  params: {op: add, size_mb: 0.1}
  repetitions: 1
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "study.yaml"
    p.write_text(text)
    return p


def test_shipped_smoke_loads_and_expands():
    assert "smoke" in shipped_studies()
    full = load_study("smoke")
    assert {c.framework for c in full.cases} == {"numpy", "torch"}
    assert {c.params["op"] for c in full.cases} == {"dot", "add"}
    quick = load_study("smoke", quick=True)
    assert quick.variant == "quick" and len(quick.cases) < len(full.cases) + 1
    assert quick.study_hash != full.study_hash


def test_expansion_counts_and_keys(tmp_path):
    s = load_study(str(write(tmp_path, GOOD)))
    # (2 matmul + 1 add) x 2 frameworks x 1 device x 2 repetitions
    assert len(s.cases) == 12
    assert len({(c.key, c.repetition) for c in s.cases}) == 12
    assert s.cases[0].params == {"op": "dot", "size_mb": 1.0, "dtype": "float32"}  # matmul -> dot; defaults in
    q = load_study(str(write(tmp_path, GOOD)), quick=True)
    assert len(q.cases) == 2 and q.settings.repetitions == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: t\nworkload: ops\nframeworks: [numpy\n", "YAML syntax error"),
        (GOOD + "colour: red\n", "colour: unknown key"),
        (GOOD.replace("numpy, torch", "numpy, tourch"), "frameworks[1]: unknown framework 'tourch'"),
        (GOOD.replace("repetitions: 2", "repetitions: -3"), "repetitions: Input should be greater than 0"),
        (GOOD.replace("workload: ops", "workload: opz"), "workload: unknown workload 'opz'"),
        (GOOD.replace("size_mb: [1, 2]", "size_mb: [1, -2]"), "params[0].size_mb: Input should be greater than 0"),
        (GOOD.replace("op: add", "op: divide"), "params[1].op: Input should be 'add', 'mul', "),
        (GOOD + "devices: [tpu]\n", "devices[0]: unknown device 'tpu'"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
def test_bad_study_files_give_one_line(tmp_path, text, expected):
    p = write(tmp_path, text)
    with pytest.raises(StudyError) as exc:
        load_study(str(p))
    msg = str(exc.value)
    assert msg.startswith(str(p)), msg
    assert expected in msg, msg
    assert "\n" not in msg


def test_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(StudyError, match="study file not found"):
        load_study(str(tmp_path / "nope.yaml"))
    with pytest.raises(StudyError, match="no such study"):
        load_study("no_such_study")


def test_quick_without_variant(tmp_path):
    p = write(tmp_path, "name: t\nworkload: ops\nframeworks: [numpy]\nparams: {op: add, size_mb: 1}\n")
    with pytest.raises(StudyError, match="no 'quick' variant"):
        load_study(str(p), quick=True)


def test_yaml_error_names_line(tmp_path):
    p = write(tmp_path, "name: t\nworkload: ops\nframeworks: [numpy\n")
    with pytest.raises(StudyError) as exc:
        load_study(str(p))
    assert f"{p}:4:" in str(exc.value) or f"{p}:3:" in str(exc.value)


def test_a_default_left_out_of_the_keys_is_still_matched_by_an_exclude(tmp_path):
    """The model workload's `variant` is left out of a case's params and key at its default (eager), so a plain
    bench's keys stay as they were; an exclude entry naming `variant: eager` must still match those cases."""
    path = tmp_path / "exc.yaml"
    path.write_text("name: exc\nworkload: model\nframeworks: [torch, onnxruntime]\n"
                    "params: {source: 'dlperf:lenet5', variant: [eager, 'ort:basic', compile]}\n"
                    "exclude:\n  - {framework: onnxruntime, variant: [eager, compile]}\n"
                    "  - {framework: torch, variant: 'ort:basic'}\n")
    study = load_study(str(path))
    keys = [c.key for c in study.cases]
    base = "batch=1,precision=fp32,source=dlperf:lenet5,task=infer"
    assert keys == [f"model/torch/cpu/{base}", f"model/torch/cpu/{base},variant=compile",
                    f"model/onnxruntime/cpu/{base},variant=ort:basic"]
    assert study.count_cases().n == 3
