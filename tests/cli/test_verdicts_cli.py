"""`dlperf verdicts` on a small real store: every claim printed with a verdict, the runs it used named,
JSON that parses, and bad input as one line with a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlperf.claims.loader import load_claims
from tests.cli.conftest import DlperfMain, assert_one_line_error
from tests.conftest import STUDIES, run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding one run of a two-backend stand-in for the `backends` study, made by `dlperf run`."""
    db = tmp_path_factory.mktemp("verdicts") / "v.sqlite"
    res = run_cli("run", str(STUDIES / "claims_backends.yaml"), db=db)
    assert res.returncode == 0, res.stderr
    run_id = next(line.split()[1].rstrip(":") for line in res.stdout.splitlines() if line.startswith("run backends-"))
    return db, run_id


def test_every_claim_is_printed_with_a_verdict_and_the_runs_used_are_named(store: tuple[Path, str],
                                                                            dlperf_main: DlperfMain) -> None:
    db, run_id = store
    res = dlperf_main("verdicts", db=db)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert (f"runs judged (the newest complete run of each study with an ok case): {run_id} (backends, full, "
            "complete)") in res.stdout
    assert "no complete run with an ok case of mlp, cnn, ops in this store" in res.stdout
    for claim in load_claims():
        assert claim.id in res.stdout
    assert f"{len(load_claims())} claims: " in res.stdout
    assert "no CUDA GPU in these runs" in res.stdout
    # the claims' own words only with --long (the table stays readable in a terminal)
    some = load_claims()[0].text.split()[:3]
    assert " ".join(some) not in " ".join(res.stdout.split())
    long_ = dlperf_main("verdicts", "--long", db=db)
    assert long_.returncode == 0 and "claim text" in long_.stdout and "quantity" in long_.stdout
    assert " ".join(some) in " ".join(long_.stdout.replace("│", " ").split())


def test_json_has_one_verdict_per_claim(store: tuple[Path, str], dlperf_main: DlperfMain) -> None:
    db, run_id = store
    res = dlperf_main("verdicts", run_id, "--format", "json", db=db)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [r["id"] for r in out["runs"]] == [run_id]
    by_id = {v["claim_id"]: v for v in out["verdicts"]}
    assert list(by_id) == [c.id for c in load_claims()]
    seq_vec = by_id["003-seq-over-vec-mlp"]  # both backends ran: a measured figure, judged either way
    assert seq_vec["verdict"] in ("holds", "does not hold") and seq_vec["measured"].endswith("x")
    assert seq_vec["run_ids"] == [run_id]
    assert by_id["003-seq-over-gpu-mlp"]["verdict"] == "cannot check here"
    assert by_id["000-gpu-speedup-tensors-large"]["detail"] == ("no mlp run given; run "
                                                                 "`dlperf run mlp --framework torch`")


def test_an_unknown_run_or_store_is_one_line(store: tuple[Path, str], dlperf_main: DlperfMain,
                                             tmp_path: Path) -> None:
    db, _ = store
    assert_one_line_error(dlperf_main("verdicts", "no-such-run", db=db), "unknown run 'no-such-run'")
    missing = dlperf_main("verdicts", db=tmp_path / "absent.sqlite")
    assert_one_line_error(missing)
    assert not (tmp_path / "absent.sqlite").exists()


def test_an_empty_newer_run_is_passed_over_and_named_when_given(store: tuple[Path, str], dlperf_main: DlperfMain,
                                                                 tmp_path: Path) -> None:
    import shutil

    from dlperf.store import Store

    db, run_id = store
    copy = tmp_path / "copy.sqlite"
    shutil.copy(db, copy)
    s = Store(copy)
    empty = s.create_run(study="backends", variant="full", study_hash="h", study_path="p", filters={}, settings={},
                         env_id=int(s.run(run_id).env_id), n_cases=5, dlperf_version="0")
    s.set_run_status(empty, "complete")
    s.engine.dispose()
    res = dlperf_main("verdicts", db=copy)
    assert res.returncode == 0, res.stderr
    assert f"{run_id} (backends, full, complete)" in res.stdout
    assert f"passed over (complete, no ok case): {empty}" in " ".join(res.stdout.split())
    given = json.loads(dlperf_main("verdicts", empty, "--format", "json", db=copy).stdout)
    by_id = {v["claim_id"]: v for v in given["verdicts"]}
    assert by_id["003-seq-over-vec-mlp"]["detail"] == (f"run {empty} has no backends results (complete, 0 of 5 "
                                                       "cases stored); run `dlperf run backends --quick`")
