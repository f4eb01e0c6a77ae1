"""`dlperf compare` as a CI uses it, on a temp store of seeded synthetic results: the table and its summary, the
exit status of --fail-on-regression (1 exactly when a compared case's whole CI lies above the threshold),
--format json, one-line errors for bad values, and the different-environments warning."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dlperf.core.result import CaseResult, Metrics
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error

KEY = "ops/numpy/cpu/dtype=float32,op=add,size_mb={}"


def times(scale: float, seed: int, n: int = 300) -> list[float]:
    return list(scale * np.random.default_rng(seed).lognormal(0.0, 0.05, n))


def make_run(store: Store, cases: dict[str, tuple[float, str | None]], seed: int, cpu: str = "x") -> str:
    """A run whose case `key` has per-call times around `scale` seconds and the given validity."""
    env_id = store.environment_id({"cpu_model": cpu}, f"hash-{cpu}")
    run_id = store.create_run(study="s", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                              env_id=env_id, n_cases=len(cases), dlperf_version="0")
    now = datetime.now(UTC)
    for i, (key, (scale, validity)) in enumerate(cases.items()):
        t = times(scale, seed + i)
        metrics = Metrics(validity=validity, validity_reason=f"{validity} on purpose" if validity else None)
        store.add_result(CaseResult(
            run_id=run_id, case_key=key, repetition=0, workload="ops", framework="numpy", device="cpu",
            params={}, status="ok", measurement={"sample_times_s": t, "sample_iters": [1] * len(t)},
            metrics=metrics, env_id=env_id, started_at=now, finished_at=now))
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
