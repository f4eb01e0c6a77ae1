"""Every bounded column of the store against the longest value dlperf writes into it: PostgreSQL enforces a
VARCHAR's length (the insert fails), SQLite does not, so a value too long for its column works on one store and
breaks the other. A run's variant is unbounded text since schema version 4 (a maxbatch variant is its target
and every `-p` parameter)."""

from __future__ import annotations

from typing import get_args

import pytest
from sqlalchemy import String, Text

from dlperf import __version__
from dlperf.core.status import CaseStatus, RunStatus
from dlperf.errors import StudyError
from dlperf.frameworks import REGISTRY as FRAMEWORKS
from dlperf.runner.maxbatch import resolve_target
from dlperf.store.schema import results, run_leases, runs
from dlperf.studies import load_study
from dlperf.studies.schema import STUDY_NAME_MAX, is_device_name
from dlperf.workloads import REGISTRY as WORKLOADS

#: What `Store.create_run` adds to a study's name in a run id: '-', YYYYmmdd-HHMMSS, '-', 4 hex digits.
RUN_ID_SUFFIX = len("-20260101-120000-abcd")


def width(column) -> int:
    assert isinstance(column.type, String) and column.type.length, column
    return int(column.type.length)


def test_the_variant_column_is_unbounded_text():
    assert isinstance(runs.c.variant.type, Text) and runs.c.variant.type.length is None
    label = resolve_target("transformer", {"model": "gpt2-tiny", "seq_len": 8, "task": "train"}).label
    assert len(label) > 16  # what broke PostgreSQL's VARCHAR(16)


def test_a_run_id_and_its_study_fit_their_columns():
    assert STUDY_NAME_MAX + RUN_ID_SUFFIX <= width(runs.c.id) == width(results.c.run_id) == width(run_leases.c.run_id)
    assert STUDY_NAME_MAX <= width(runs.c.study)


def test_statuses_names_and_version_fit_their_columns():
    assert max(map(len, get_args(RunStatus))) <= width(runs.c.status)
    assert max(map(len, get_args(CaseStatus))) <= width(results.c.status)
    assert max(map(len, WORKLOADS)) <= width(results.c.workload)
    assert max(map(len, FRAMEWORKS)) <= width(results.c.framework)
    assert len(__version__) <= width(runs.c.dlperf_version)


def test_the_longest_device_name_fits_and_a_longer_one_is_refused():
    longest = "cuda:9999"
    assert is_device_name(longest) and len(longest) <= width(results.c.device)
    assert not is_device_name("cuda:" + "9" * 40)


def test_a_study_name_too_long_for_a_run_id_is_refused(tmp_path):
    study = tmp_path / "long.yaml"
    rest = "workload: ops\nframeworks: [numpy]\nparams: {op: [add], size_mb: [1]}\n"
    study.write_text(f"name: {'n' * (STUDY_NAME_MAX + 1)}\n{rest}")
    with pytest.raises(StudyError, match=f"at most {STUDY_NAME_MAX} characters"):
        load_study(str(study))
    study.write_text(f"name: {'n' * STUDY_NAME_MAX}\n{rest}")
    assert load_study(str(study)).name == "n" * STUDY_NAME_MAX
