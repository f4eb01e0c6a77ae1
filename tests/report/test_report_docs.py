"""The JSON documents of `history` and `matrix` are typed field by field (report.history_report, report.matrix):
each must carry every field of the dataclass it is written from, in its order, so a field added there is never
silently left out of the JSON."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from dlperf.analysis.history import NewestCheck, Point
from dlperf.report.history_report import CellDoc, NewestDoc, cell_doc
from dlperf.report.matrix import ColumnDoc, MachineColumn


def _names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def test_each_doc_holds_every_field_of_its_dataclass_in_order() -> None:
    assert list(CellDoc.__annotations__) == [n for n in _names(Point) if n != "run_index"]
    assert list(NewestDoc.__annotations__) == _names(NewestCheck)
    assert list(ColumnDoc.__annotations__) == _names(MachineColumn)


def test_a_cell_is_the_point_without_its_run_index() -> None:
    p = Point(run_index=3, status="ok", median_s=0.002, ci_low_s=0.0019, ci_high_s=0.0021, validity="valid",
              processes=2, usable=True, reason=None, canary_s=0.5)
    doc = cell_doc(p)
    assert list(doc) == list(CellDoc.__annotations__)
    assert doc["median_s"] == 0.002 and doc["processes"] == 2 and doc["canary_s"] == 0.5
    assert "run_index" not in doc


def test_a_column_doc_has_its_start_as_iso_text() -> None:
    from dlperf.report.matrix import StudyMatrix, matrix_json

    col = MachineColumn("m1", "w1", "CPU x", "r1", datetime(2026, 1, 2, 3, 4, tzinfo=UTC), {"torch": "2.1"}, 2)
    doc = matrix_json(StudyMatrix("s", [col], [], {}, [("m2", "w2", "r2", "running")]))
    assert doc["machines"] == [{"machine_id": "m1", "label": "w1", "identity": "CPU x", "run_id": "r1",
                                "started_at": "2026-01-02T03:04:00+00:00", "software": {"torch": "2.1"},
                                "run_machines": 2}]
    assert doc["incomplete"] == [{"machine_id": "m2", "label": "w2", "newest_run": "r2", "status": "running"}]


def test_a_comparison_doc_holds_every_field_of_its_dataclass_in_order() -> None:
    from dataclasses import asdict

    from dlperf.analysis.compare import CaseComparison, ComparisonDoc, Summary, SummaryDoc

    assert list(ComparisonDoc.__annotations__) == _names(CaseComparison)
    assert list(SummaryDoc.__annotations__) == _names(Summary)
    c = CaseComparison("k", "slower", 3, 3, 0.001, 0.002, 2.0, 1.9, 2.1, 0.01, "samples", True, ["n"], ["valid"],
                       [None], 1.95, 2.05, 0.99, 1.01)
    assert c.as_dict() == asdict(c) and list(c.as_dict()) == list(asdict(c))
    s = Summary(1, 2.0, 1.9, 2.1, {"slower": 1})
    assert s.as_dict() == asdict(s) and list(s.as_dict()) == list(asdict(s))
