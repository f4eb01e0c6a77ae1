"""Validity reaches the study reports: a line under each non-ops study, marks in the study-002 tables."""

from __future__ import annotations

from dlperf.core.result import CaseResult, Metrics
from dlperf.report.ops_report import VALIDITY_MARKS, validity_mark
from dlperf.report.registry import validity_note
from dlperf.report.sections import Note
from tests.factories import case, report_data


def _result(key: str, validity: str | None, workload: str = "mlp") -> CaseResult:
    return case(key, workload=workload, framework="torch", metrics=Metrics(validity=validity))


def test_a_study_with_contended_or_noisy_cases_says_which() -> None:
    results = [_result("mlp/torch/cpu/size=small", "contended"), _result("mlp/torch/cpu/size=large", "noisy"),
               _result("mlp/numpy/cpu/size=small", "valid"), _result("mlp/numpy/cpu/size=large", None)]
    data = report_data(results)
    (note,) = validity_note("mlp", data)
    assert isinstance(note, Note)
    assert "1 contended, 1 noisy of the mlp figures" in note.text
    assert "torch/cpu/size=small" in note.text and "numpy" not in note.text
    assert validity_note("mlp", report_data(results[2:])) == []


class _P:  # the part of an OpsPoint validity_mark reads
    def __init__(self, validity: str | None) -> None:
        self.metrics = Metrics(validity=validity)


def test_a_study_table_figure_carries_the_worst_validity_of_its_measurements() -> None:
    assert validity_mark([_P("valid"), _P(None)]) == ""
    assert validity_mark([_P("valid"), _P("noisy")]) == VALIDITY_MARKS["noisy"]
    assert validity_mark([_P("noisy"), _P("contended")]) == VALIDITY_MARKS["contended"]
    assert validity_mark([_P("contended"), _P("invalid")]) == VALIDITY_MARKS["invalid"]
