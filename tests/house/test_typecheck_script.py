"""scripts/typecheck.py's verdict on mypy's error lines (recorded here, mypy not run): a strict module may have
none, another file at most its baseline's count, a new file none; fewer is reported, never a failure."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import typecheck

LINE = "{}:{}: error: Incompatible types in assignment  [assignment]"


def test_a_strict_module_may_have_no_error_whatever_the_baseline():
    errors = [LINE.format("src/dlperf/store/db.py", 3)]
    failures, counts, _ = typecheck.judge(errors, {"src/dlperf/store/db.py": 5})
    assert counts == {"src/dlperf/store/db.py": 1}
    assert len(failures) == 1 and "a strict module" in failures[0] and "db.py:3" in failures[0]
    assert typecheck.judge([LINE.format("src/dlperf/units.py", 1)], {})[0]


def test_other_files_are_held_to_their_baseline_and_new_ones_to_none():
    base = {"src/dlperf/report/tables.py": 2}
    two = [LINE.format("src/dlperf/report/tables.py", n) for n in (1, 2)]
    assert typecheck.judge(two, base)[0] == []
    assert "the baseline allows 2" in typecheck.judge([*two, LINE.format("src/dlperf/report/tables.py", 9)], base)[0][0]
    assert "the baseline allows 0" in typecheck.judge([LINE.format("src/dlperf/cli/run.py", 1)], base)[0][0]


def test_fewer_errors_pass_and_say_so():
    failures, counts, fell = typecheck.judge([], {"src/dlperf/report/tables.py": 2})
    assert failures == [] and counts == {} and fell == ["src/dlperf/report/tables.py: 2 -> 0"]


def test_the_committed_baseline_names_no_strict_module():
    import json

    baseline = json.loads(typecheck.BASELINE.read_text())
    assert baseline and not [p for p in baseline if typecheck.STRICT.search(p)]
