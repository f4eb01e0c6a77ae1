"""A study's cases, counted without being built: the count is the number of cases the expansion gives (on any
filters, with duplicates and excludes), a huge grid is counted only up to where it is asked, and a study
that expands to nothing is refused when it is loaded, naming its file."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from dlperf.errors import StudyError
from dlperf.studies import load_study, loader, shipped_studies

MIXED = """
name: mixed
workload: ops
frameworks: [numpy, torch, jax]
devices: [cpu, cuda]
params:
  - {op: [matmul, dot, add], size_mb: [1, 2, 1.0]}
  - {op: add, size_mb: [2, 3]}
repetitions: 3
exclude:
  - {framework: jax, device: cuda}
  - {framework: torch, op: add, size_mb: 3}
"""

#: 32^4 = 1,048,576 distinct points of the mlp grid (n x d_in x h x d_out), one line each in YAML.
AXIS = "[" + ", ".join(str(i) for i in range(1, 33)) + "]"
HUGE = f"""
name: huge
workload: mlp
frameworks: [numpy]
params: {{variant: tensors, size: custom, n: {AXIS}, d_in: {AXIS}, h: {AXIS}, d_out: {AXIS}}}
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_mixed_grid_counts_what_it_expands_to(tmp_path):
    s = load_study(str(write(tmp_path, MIXED)))
    # points: dot 1, dot 2, add 1, add 2 (matmul = dot, 1.0 = 1: duplicates), add 3 -> 5 distinct
    # pairs: 3 frameworks x 2 devices - (jax, cuda) = 5; torch add 3 out on 2 devices; x 3 repetitions
    assert len(s.cases) == (5 * 5 - 2) * 3 == 69
    assert len({(c.key, c.repetition) for c in s.cases}) == 69
    for fws, devs in itertools.product([(), ("numpy",), ("torch", "jax")], [(), ("cpu",), ("cuda",)]):
        count = s.count_cases(fws, devs)
        built = list(s.iter_cases(fws, devs))
        assert count.exact and count.n == len(built)
        # the filtered expansion is the full one's cases on those filters, in the same order
        assert built == [c for c in s.cases if (not fws or c.framework in fws) and (not devs or c.device in devs)]
        firsts = list(s.iter_cases(fws, devs, repetitions=False))
        assert firsts == [c for c in built if c.repetition == 0]
    assert s.count_cases().at_most == (9 + 2) * 5 * 3  # the grid's product before duplicates and excludes


@pytest.mark.parametrize("name", sorted(shipped_studies()))
@pytest.mark.parametrize("quick", [False, True])
def test_shipped_studies_count_what_they_expand_to(name, quick):
    try:
        s = load_study(name, quick=quick)
    except StudyError as exc:
        assert "no 'quick' variant" in str(exc)
        return
    count = s.count_cases()
    assert count.exact and count.n == len(s.cases) > 0


def test_points_made_again_per_pair_give_the_same_cases(tmp_path, monkeypatch):
    """Past COUNT_CAP points, iter_cases makes the points again for each (framework, device) instead of keeping
    them: the same cases in the same order."""
    kept = list(load_study(str(write(tmp_path, MIXED))).iter_cases())
    monkeypatch.setattr(loader, "COUNT_CAP", 1)
    assert list(load_study(str(write(tmp_path, MIXED, "again.yaml"))).iter_cases()) == kept


def test_a_huge_grid_is_counted_only_as_far_as_asked(tmp_path):
    started = time.process_time()
    s = load_study(str(write(tmp_path, HUGE)))
    count = s.count_cases(stop_after=5000)
    assert (count.n, count.exact, count.at_most) == (5000, False, 32**4)
    assert time.process_time() - started < 2.0  # counting 10^6 points (or building them) takes far longer
    first = next(s.iter_cases())
    assert first.params["n"] == first.params["d_out"] == 1


def test_one_point_with_many_repetitions_is_counted_exactly(tmp_path):
    s = load_study(str(write(tmp_path, "name: r\nworkload: ops\nframeworks: [numpy]\n"
                                       "params: {op: add, size_mb: 1}\nrepetitions: 1000000\n")))
    count = s.count_cases(stop_after=5000)
    assert (count.n, count.exact) == (1_000_000, True)  # the count passed 5,000 at the last point


@pytest.mark.parametrize(("text", "fragments"), [
    ("params: {op: add, size_mb: []}\n", ["params.size_mb: an empty list, so the grid has no case"]),
    ("params: []\n", ["params: an empty list, so the study has no case"]),
    ("params:\n  - {op: add, size_mb: 1}\n  - {op: dot, size_mb: []}\n", ["params[1].size_mb: an empty list"]),
    ("params: {op: add, size_mb: [1, 2]}\nexclude:\n  - {op: add}\n",
     ["exclude: the entries leave no case", "each of the 4 case-repetitions"]),
    ("params: {op: add, size_mb: 1}\nexclude:\n  - {framework: numpy}\n  - {framework: torch, device: cpu}\n",
     ["exclude: the entries leave no case"]),
    ("params: {op: add, size_mb: 1}\nquick:\n  params: {op: add, size_mb: []}\n",
     ["quick.params.size_mb: an empty list"]),
    ("params: {op: add, size_mb: 1}\nquick:\n  exclude: [{op: add}]\n", ["quick.exclude: the entries leave no case"]),
])
def test_a_study_with_no_case_is_refused_naming_its_file(tmp_path, text, fragments):
    p = write(tmp_path, "name: e\nworkload: ops\nframeworks: [numpy, torch]\n" + text)
    quick = "quick:" in text
    with pytest.raises(StudyError) as exc:
        load_study(str(p), quick=quick)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and "\n" not in msg, msg
    for f in fragments:
        assert f in msg, msg
