"""A failed case's reason is one line that says what went wrong (errors.exception_line). OpenVINO puts a line naming
a C++ source location before its message for each layer the error crossed, so its first line said only
"RuntimeError: Exception from src/inference/src/cpp/core.cpp:117" (seen on an OpenVINO int8 case whose
oneDNN primitive could not be made)."""

from __future__ import annotations

from typing import Any

import pytest

from dlperf.errors import exception_line
from tests.runner.conftest import builds_fail_with

#: OpenVINO's messages as it raised them here (2026.4), oneDNN restricted below the CPU's ISA.
RECORDED = [
    ("Exception from src/inference/src/cpp/core.cpp:117:\nException from src/inference/src/dev/plugin.cpp:54:\n"
     "could not create a primitive descriptor for the matmul primitive. Run workload with environment variable "
     "ONEDNN_VERBOSE=all to get additional diagnostic information.\n",
     "RuntimeError: could not create a primitive descriptor for the matmul primitive. Run workload with environment "
     "variable ONEDNN_VERBOSE=all to get additional diagnostic information."),
    ("Exception from src/inference/src/cpp/core.cpp:117:\nException from src/inference/src/dev/plugin.cpp:54:\n"
     "Check '!getSupportedPrimitiveDescriptors().empty()' failed at src/plugins/intel_cpu/src/node.cpp:345:\n"
     "Supported primitive descriptors list is empty for node: out type: Softmax\n",
     "RuntimeError: Supported primitive descriptors list is empty for node: out type: Softmax"),
    ("Exception from src/inference/src/cpp/core.cpp:117:\n",  # nothing but a location: the first line
     "RuntimeError: Exception from src/inference/src/cpp/core.cpp:117"),
    ("a plain message\nwith a second line", "RuntimeError: a plain message"),
    ("", "RuntimeError"),
    ("  \n\n  ", "RuntimeError"),
]


@pytest.mark.parametrize(("message", "line"), RECORDED)
def test_the_line_is_the_first_that_says_what_went_wrong(message: str, line: str) -> None:
    assert exception_line(RuntimeError(message)) == line


def test_a_source_location_in_a_sentence_is_kept() -> None:
    exc = ValueError("bad shape at model.py:12 (input x)")
    assert exception_line(exc) == "ValueError: bad shape at model.py:12 (input x)"


def test_a_real_openvino_error_reads_as_its_message() -> None:
    ov = pytest.importorskip("openvino", reason="the openvino extra is not installed")
    import numpy as np
    from openvino import opset13 as ops

    x = ops.parameter([2, 3], np.float32)
    model = ov.Model([ops.relu(x)], [x])
    with pytest.raises(Exception) as caught:
        ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "nonsense"})
    assert str(caught.value).startswith("Exception from src/")  # what the first line said
    line = exception_line(caught.value)
    assert line.startswith(f"{type(caught.value).__name__}: ")
    assert "nonsense" in line and "INFERENCE_PRECISION_HINT" in line
    assert "\n" not in line and "Exception from" not in line


def _job() -> Any:
    from dlperf.core.jobs import CaseJob, CaseSpec
    from dlperf.core.settings import RunSettings

    return CaseJob(case=CaseSpec(workload="ops", framework="numpy", device="cpu",
                                 params={"op": "add", "size_mb": 0.001}),
                   settings=RunSettings(frameworks=["numpy"], devices=["cpu"], steps=1))


def test_a_case_that_fails_building_stores_that_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the worker: a case whose build raises OpenVINO's kind of message stores the line that names it."""
    from dlperf.runner.worker import run_case

    builds_fail_with(monkeypatch, RuntimeError(RECORDED[1][0]))
    out = run_case(_job())
    assert (out["status"], out["reason"]) == (
        "error", "RuntimeError: Supported primitive descriptors list is empty for node: out type: Softmax")


def test_a_framework_that_fails_importing_stores_that_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from dlperf.frameworks.numpy_fw import NumpyFramework
    from dlperf.runner.worker import run_case

    def import_module(self: Any) -> Any:
        raise RuntimeError(RECORDED[0][0])

    monkeypatch.setattr(NumpyFramework, "import_module", import_module)
    out = run_case(_job())
    assert out["status"] == "error"
    assert out["reason"].startswith("RuntimeError: could not create a primitive descriptor for the matmul primitive.")
    assert out["reason"].endswith("(importing numpy)")
