"""`dlperf compare` as a CI uses it, on a temp store of seeded synthetic results: the table and its summary, the
exit status of --fail-on-regression (1 exactly when a compared case's whole CI lies above the threshold),
--format json, one-line errors for bad values, and the different-environments warning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dlperf.core.result import Metrics
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error
from tests.factories import case

KEY = "ops/numpy/cpu/dtype=float32,op=add,size_mb={}"


def times(scale: float, seed: int, n: int = 300) -> list[float]:
    return list(scale * np.random.default_rng(seed).lognormal(0.0, 0.05, n))


def make_run(store: Store, cases: dict[str, tuple[float, str | None]], seed: int, cpu: str = "x") -> str:
    """A run whose case `key` has per-call times around `scale` seconds and the given validity."""
    env_id = store.environment_id({"cpu_model": cpu}, f"hash-{cpu}")
    run_id = store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                              env_id=env_id, n_cases=len(cases), dlperf_version="0")
    for i, (key, (scale, validity)) in enumerate(cases.items()):
        metrics = Metrics(validity=validity, validity_reason=f"{validity} on purpose" if validity else None)
        store.add_result(case(key, run_id=run_id, times_s=times(scale, seed + i), metrics=metrics, env_id=env_id))
    return run_id


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str, str]:
    """Run A, and run B with one case 1% slower (no change), one 30% slower, one contended 30x slower."""
    db = tmp_path / "cmp.sqlite"
    s = Store(db)
    a = make_run(s, {KEY.format(1): (1e-3, "valid"), KEY.format(2): (2e-3, None), KEY.format(3): (232e-6, "valid")},
                 seed=1)
    b = make_run(s, {KEY.format(1): (1.01e-3, "valid"), KEY.format(2): (2.6e-3, "valid"),
                     KEY.format(3): (7.96e-3, "contended")}, seed=100)
    return db, a, b


def test_table_verdicts_and_summary(dlperf_main, store):
    db, a, b = store
    res = dlperf_main("compare", a, b, db=db)
    assert res.returncode == 0 and res.stderr == ""
    lines = {k: next(x for x in res.stdout.splitlines() if KEY.format(k) in x) for k in (1, 2, 3)}
    assert "no change" in lines[1] and "slower" in lines[2]
    assert "contended: not compared (B: contended on purpose)" in lines[3] and "slower" not in lines[3]
    for col in ("case", "A median", "B median", "B/A [95% CI]", "p", "verdict"):
        assert col in res.stdout
    assert "different environments" not in res.stdout
    assert "geometric mean B/A over 2 compared cases" in res.stdout and "1 contended" in res.stdout


@pytest.fixture
def clean_store(tmp_path: Path) -> tuple[Path, str, str]:
    """Run A, and run B with one case 1% slower and one 30% slower; every case valid."""
    db = tmp_path / "clean.sqlite"
    s = Store(db)
    a = make_run(s, {KEY.format(1): (1e-3, "valid"), KEY.format(2): (2e-3, None)}, seed=1)
    b = make_run(s, {KEY.format(1): (1.01e-3, "valid"), KEY.format(2): (2.6e-3, "valid")}, seed=100)
    return db, a, b


# case 2 is B/A 1.299 [1.288, 1.310]: at 29% its point estimate is beyond the threshold, its CI is not: exit 0
@pytest.mark.parametrize(("pct", "code"), [("10", 1), ("40", 0), ("0", 1), ("29%", 0), ("28.5", 1)])
def test_fail_on_regression_exits_1_exactly_when_a_case_is_beyond_it(dlperf_main, clean_store, pct, code):
    db, a, b = clean_store
    res = dlperf_main("compare", a, b, "--fail-on-regression", pct, db=db)
    assert res.returncode == code, res.stderr
    if code:
        assert res.stderr.startswith("dlperf: ") and KEY.format(2) in res.stderr
        # at 0%, the 1% shift whose whole CI lies above 1.00 is a regression too; at 10% it is not
        assert (KEY.format(1) in res.stderr) == (pct == "0")
    else:
        assert res.stderr == "" and "regressions beyond" in res.stdout and ": none" in res.stdout


def test_the_gate_fails_closed_on_a_case_it_could_not_check(dlperf_main, store):
    db, a, b = store
    res = dlperf_main("compare", a, b, "--fail-on-regression", "40", db=db)
    assert res.returncode == 1
    assert "slower by more than" not in res.stderr  # contended: 34x slower and still never a regression ...
    assert "could not be checked (contended" in res.stderr and KEY.format(3) in res.stderr  # ... nor a pass


def test_json_for_ci(dlperf_main, store):
    db, a, b = store
    res = dlperf_main("compare", a, b, "--format", "json", "--min-effect", "0.5", "--fail-on-regression", "10",
                      db=db)
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    cases = {c["case_key"]: c for c in doc["cases"]}
    assert cases[KEY.format(1)]["verdict"] == "slower"  # with a 0.5% minimum effect a clear 1% counts
    assert cases[KEY.format(2)]["ci_low"] > 1.1 and cases[KEY.format(3)]["ratio"] is None
    assert doc["regressions"] == [KEY.format(2)] and doc["min_effect_pct"] == 0.5
    assert doc["summary"]["n_compared"] == 2 and doc["summary"]["counts"]["contended"] == 1


@pytest.mark.parametrize(("args", "fragment"), [
    (["--min-effect", "-1"], "--min-effect"), (["--min-effect", "nan"], "finite percentage"),
    (["--fail-on-regression", "-5"], "--fail-on-regression"), (["--fail-on-regression", "x"], "not a percentage"),
    (["--format", "xml"], "--format"),
])
def test_bad_values_are_one_line_errors(dlperf_main, store, args, fragment):
    db, a, b = store
    res = dlperf_main("compare", a, b, *args, db=db)
    assert_one_line_error(res, fragment)
    assert res.returncode == 2


def test_different_environments_are_still_warned(dlperf_main, tmp_path):
    db = tmp_path / "env.sqlite"
    s = Store(db)
    a = make_run(s, {KEY.format(1): (1e-3, None)}, seed=1, cpu="x")
    b = make_run(s, {KEY.format(1): (1e-3, None)}, seed=2, cpu="y")
    res = dlperf_main("compare", a, b, db=db)
    assert res.returncode == 0 and "the two runs come from different environments" in res.stdout
    assert "cpu_model: 'x' -> 'y'" in res.stdout


def test_a_framework_only_one_run_loaded_is_not_another_environment(dlperf_main, tmp_path):
    """Two bench runs, B with onnxruntime beside torch: the case both ran is torch's, on the same software, so the
    runs are not called different environments; a line says which framework only one of them loaded."""
    db = tmp_path / "fw.sqlite"
    s = Store(db)
    torch = {"torch": {"version": "2.13.0"}}
    ids = []
    for seed, frameworks in ((1, torch), (2, torch | {"onnxruntime": {"version": "1.32.0"}})):
        env_id = s.environment_id({"cpu_model": "x", "frameworks": frameworks}, f"hash-{seed}")
        run_id = s.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                              env_id=env_id, n_cases=1, dlperf_version="0")
        s.add_result(case(KEY.format(1), run_id=run_id, times_s=times(1e-3, seed), metrics=Metrics(validity="valid"),
                          env_id=env_id))
        ids.append(run_id)
    res = dlperf_main("compare", *ids, db=db)
    assert res.returncode == 0, res.stderr
    assert "different environments" not in res.stdout
    assert "onnxruntime: loaded by run B only (none of the cases both runs measured ran on it)" in res.stdout
    doc = json.loads(dlperf_main("compare", *ids, "--format", "json", db=db).stdout)
    assert doc["environment_diffs"] == [] and doc["frameworks_one_side"] == {"onnxruntime": "b"}


def threads_run(store: Store, threads: int, how: dict | None, filters: dict | None = None) -> str:
    """A run of one valid case on CPU "x" with `threads` (its environment's), stored with `how` they came about
    (None: not recorded, as a run stored before dlperf recorded it)."""
    fp = {"cpu_model": "x", "threads": threads}
    env_id = store.environment_id(fp, f"hash-x-{threads}")
    run_id = store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters=filters or {},
                              settings={"threads": threads}, env_id=env_id, n_cases=1, dlperf_version="0",
                              derived=None if how is None else {"threads_source": how})
    store.add_result(case(KEY.format(1), run_id=run_id, times_s=times(1e-3, threads), metrics=Metrics(validity="valid"),
                          env_id=env_id))
    return run_id


LOAD = {"chosen": True, "by": "load", "why": "1 of 2 physical cores: other processes used 1.0 cores at the start"}
IDLE = {"chosen": True, "by": "load", "why": "the 2 physical cores (other processes used 0.0 cores at the start)"}
ASKED = {"chosen": False, "by": "--threads", "why": "given on the command line"}


def test_threads_chosen_by_the_load_are_no_other_environment(dlperf_main, tmp_path):
    """Two runs of one command whose threads the load chose differently: compared as the same machine and
    software, with a line saying the threads differ and, for each side, that they were chosen and why."""
    s = Store(tmp_path / "t.sqlite")
    a, b = threads_run(s, 2, IDLE), threads_run(s, 1, LOAD)
    res = dlperf_main("compare", a, b, db=tmp_path / "t.sqlite")
    assert res.returncode == 0 and res.stderr == ""
    assert "different environments" not in res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("threads differ"))
    assert line == f"threads differ: A 2 (chosen for it: {IDLE['why']}); B 1 (chosen for it: {LOAD['why']})"
    assert "pin --threads" in res.stdout
    doc = json.loads(dlperf_main("compare", a, b, "--format", "json", db=tmp_path / "t.sqlite").stdout)
    assert doc["environment_diffs"] == []
    assert doc["threads"]["a"] == {"threads": 2, **IDLE} and doc["threads"]["b"] == {"threads": 1, **LOAD}


def test_threads_one_side_asked_for_and_the_other_chosen(dlperf_main, tmp_path):
    s = Store(tmp_path / "t.sqlite")
    a, b = threads_run(s, 1, ASKED), threads_run(s, 2, IDLE)
    out = dlperf_main("compare", a, b, db=tmp_path / "t.sqlite").stdout
    assert "different environments" not in out
    assert f"threads differ: A 1 (asked for: --threads); B 2 (chosen for it: {IDLE['why']})" in out


def test_threads_asked_for_on_both_sides_are_another_environment(dlperf_main, tmp_path):
    """--threads 1 against --threads 2 is a deliberate change: still a different environment, each side's
    source said."""
    s = Store(tmp_path / "t.sqlite")
    a, b = threads_run(s, 1, ASKED), threads_run(s, 2, {**ASKED, "by": "study", "why": "the study file's threads:"})
    res = dlperf_main("compare", a, b, db=tmp_path / "t.sqlite")
    assert "the two runs come from different environments (1 fields differ)" in res.stdout
    assert "  threads: 1 -> 2" in res.stdout
    assert "threads: A 1 (asked for: --threads); B 2 (asked for: the study file)" in res.stdout
    doc = json.loads(dlperf_main("compare", a, b, "--format", "json", db=tmp_path / "t.sqlite").stdout)
    assert doc["environment_diffs"] == [{"key": "threads", "a": 1, "b": 2}]


def test_older_runs_without_the_record_stay_readable(dlperf_main, tmp_path):
    """Runs stored before the source was recorded: --threads read from their filters, else "not recorded", and
    threads that differ stay an environment difference (nothing says the load chose them)."""
    s = Store(tmp_path / "t.sqlite")
    a = threads_run(s, 2, None)
    b = threads_run(s, 1, None, filters={"overrides": {"threads": 1}})
    res = dlperf_main("compare", a, b, db=tmp_path / "t.sqlite")
    assert res.returncode == 0 and res.stderr == ""
    assert "different environments" in res.stdout
    assert "threads: A 2 (how it was set: not recorded); B 1 (asked for: --threads)" in res.stdout
    doc = json.loads(dlperf_main("compare", a, b, "--format", "json", db=tmp_path / "t.sqlite").stdout)
    assert doc["threads"]["a"]["chosen"] is None and doc["threads"]["b"]["by"] == "--threads"
