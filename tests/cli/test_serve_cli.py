"""`dlperf serve` (issue 17): bad input is one line and a non-zero exit before any store exists; the case parameters
it sets make another run (another study identity), never merged with runs made without them; it ends with one
line per case from the stored format (`metrics["loadgen"]`, `metrics["server_search"]`).

The sweep's workers are replaced here (`sweep.run_case`, `sweep.collect_fingerprint`) by rows in the stored format,
so that what is tested is the command, its selection and its output, not LoadGen (tests/serving test that)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dlperf.cli.serve_select import OVERRIDES, SCENARIOS, select
from dlperf.studies import load_study
from tests.cli.conftest import assert_one_line_error

BAD = {
    "unknown scenario": (("serve", "--scenario", "burst"), "unknown scenario 'burst' (MLPerf's four: single-stream, "
                                                           "multi-stream, server, offline)"),
    "target latency zero": (("serve", "--target-latency-ms", "0"), "--target-latency-ms"),
    "target latency negative": (("serve", "--target-latency-ms", "-5"), "--target-latency-ms"),
    "target latency nan": (("serve", "--target-latency-ms", "nan"), "'nan' is not a finite number"),
    "target qps zero": (("serve", "--target-qps", "0"), "--target-qps"),
    "max batch zero": (("serve", "--max-batch", "0"), "--max-batch"),
    "min duration inf": (("serve", "--min-duration-s", "inf"), "'inf' is not a finite number"),
    "unknown model": (("serve", "resnet152"), "unknown model 'resnet152' (cnn: alexnet"),
    "unknown framework": (("serve", "--framework", "tourch"), "unknown framework 'tourch'"),
    "no inference step": (("serve", "lenet5", "--framework", "numpy"), "numpy has no cnn inference step to serve "
                                                                        "lenet5"),
    "not a served workload": (("serve", "--framework", "pytensor"), "pytensor has no inference step"),
    "model not in the quick variant": (("serve", "alexnet", "--quick"), "alexnet: not served by the serving study's "
                                                                        "quick variant"),
    "scenario not in the quick variant": (("serve", "--quick", "--scenario", "offline"), "has no offline case"),
    "override of no selected case": (("serve", "--quick", "--scenario", "single-stream", "--target-qps", "10"),
                                     "--target-qps sets the server and offline scenarios' cases; none is selected"),
    "framework not in the quick variant": (("serve", "--quick", "--framework", "tensorflow"), "no case matches"),
    "absent cuda device": (("serve", "--quick", "--device", "cuda:7"), "cuda:7"),
    "new and resume": (("serve", "--quick", "--new", "--resume", "latest"), "give one of them"),
    # absurd values: refused with the limit before any store, never inside a worker
    "target latency below a nanosecond": (("serve", "--target-latency-ms", "1e-300"), "0.001<=x<=3600000.0"),
    "target latency past LoadGen's": (("serve", "--target-latency-ms", "1e300"), "0.001<=x<=3600000.0"),
    "min duration past a week": (("serve", "--min-duration-s", "1e300"), "0<x<=604800.0"),
    "target qps past ten million": (("serve", "--target-qps", "1e308"), "<=10000000"),
    "min query count past int64": (("serve", "--min-query-count", "100000000000000000000"),
                                   "1<=x<=9223372036854775807"),
    "max batch past 4096": (("serve", "--max-batch", "100000"), "1<=x<=4096"),
    "resume of no run in no store": (("serve", "--quick", "--resume", "nosuchrun"), "--resume nosuchrun: no such run"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_and_opens_no_store(name, dlperf_main, tmp_path):
    args, fragment = BAD[name]
    db = tmp_path / "new.sqlite"
    res = dlperf_main(*args, db=db)
    assert_one_line_error(res, fragment)
    assert res.returncode == 2 and not db.exists()


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_a_runtime_that_is_not_installed_is_one_line_naming_the_extra(runtime, dlperf_main, tmp_path, monkeypatch):
    from dlperf.frameworks import REGISTRY

    monkeypatch.setattr(REGISTRY[runtime], "available", lambda self: False)
    db = tmp_path / "new.sqlite"
    res = dlperf_main("serve", "--quick", "--framework", runtime, db=db)
    assert_one_line_error(res, f"{runtime} is not installed (pip install -e '.[runtimes]')")
    assert not db.exists()


def test_the_scenarios_are_the_workloads():
    from dlperf.workloads import serve

    assert SCENARIOS == serve.SCENARIOS
    assert set(OVERRIDES) <= set(serve.ServeParams.model_fields)


@pytest.mark.parametrize("spelling", ["SingleStream", "single-stream", "single_stream", "SINGLESTREAM"])
def test_a_scenario_is_read_in_loadgens_spelling_too(spelling):
    from dlperf.cli.serve_select import ScenarioType

    assert ScenarioType().convert(spelling, None, None) == "single-stream"


def _select(quick: bool = True, **kw):
    args = {"models": [], "scenarios": [], "frameworks": [], "overrides": {}} | kw
    return select(load_study("serving", quick=quick), **args)


def test_no_selection_is_the_study_itself_so_serve_and_run_share_runs():
    study = load_study("serving", quick=True)
    assert _select().study_hash == study.study_hash
    # a value the study already has leaves the cases and so the identity as they are
    assert _select(overrides={"min_duration_s": 2.0}).study_hash == study.study_hash
    assert _select(models=["lenet5", "gpt2-tiny"], scenarios=list(SCENARIOS)).study_hash == study.study_hash


def test_an_override_or_a_narrowing_is_another_study_identity():
    base = _select()
    hashes = {base.study_hash}
    for kw in ({"overrides": {"min_duration_s": 1.0}}, {"overrides": {"target_latency_ms": 40.0}},
               {"overrides": {"target_qps": 100.0}}, {"overrides": {"max_batch": 2}},
               {"overrides": {"min_query_count": 256}}, {"models": ["lenet5"]}, {"scenarios": ["server"]}):
        hashes.add(_select(**kw).study_hash)
    assert len(hashes) == 8


def test_an_override_reaches_only_the_scenarios_it_means_something_in():
    study = _select(overrides={"target_latency_ms": 40.0, "max_batch": 2, "min_duration_s": 1.0})
    for case in study.cases:
        p = case.params
        assert p["min_duration_s"] == 1.0
        if p["scenario"] == "server":
            assert p["target_latency_ms"] == 40.0 and p["max_batch"] == 2
        else:  # a SingleStream query is one sample, and it has no latency bound
            assert "target_latency_ms" not in p and p["max_batch"] == 1
    server = _select(models=["lenet5"], scenarios=["server"], overrides={"target_qps": 50.0})
    assert [c.params["target_qps"] for c in server.cases] == [50.0, 50.0]  # torch and onnxruntime
    full = _select(quick=False, models=["bert-base"], scenarios=["offline", "single-stream"],
                   overrides={"target_qps": 20.0})
    assert {(c.params["scenario"], c.params.get("target_qps")) for c in full.cases} == {
        ("offline", 20.0), ("single-stream", None)}


# -- through the command, with the workers replaced by rows in the stored format ---------------------------------

def _loadgen(params: dict) -> dict:
    """A case's metrics in THE STORED FORMAT (issue 17's notes): an INVALID server run and a VALID single stream."""
    server = params["scenario"] == "server"
    metrics = {"loadgen": {
        "scenario": "Server" if server else "SingleStream",
        "validity": "INVALID" if server else "VALID",
        "invalid_reasons": ["latency constraint not met"] if server else [],
        "metric": ({"name": "completed samples/s", "value": 26040.4, "unit": "samples/s"} if server else
                   {"name": "p90 latency", "value": 0.000412, "unit": "s"}),
        "results": {}, "effective": {}, "loadgen_version": "test", "summary_text": "",
        "shortened": [f"min duration {params['min_duration_s']:g} s (MLPerf 600 s)"]}}
    if server:
        metrics["server_search"] = {"target_latency_s": 0.015, "percentile": 0.99, "best_qps": 640.0,
                                    "stopped": "probe limit", "probes": [
                                        {"target_qps": 640.0, "validity": "VALID", "completed_qps": 639.0,
                                         "latency_p99_s": 0.004, "invalid_reasons": [], "wall_s": 2.0},
                                        {"target_qps": 1280.0, "validity": "INVALID", "completed_qps": 812.5,
                                         "latency_p99_s": 0.2, "invalid_reasons": ["latency constraint not met"],
                                         "wall_s": 2.0}]}
    return metrics


@pytest.fixture
def stored_format(monkeypatch):
    """The sweep stores rows in the stored format without starting workers; each case run is recorded."""
    from dlperf.runner import sweep

    ran: list[str] = []

    def fake_case(case, settings, run_id, env_id, counters=False):
        ran.append(case.key)
        result = {"status": "ok", "measurement": None, "metrics": _loadgen(case.params)}
        return sweep.result_row(case, result, run_id, env_id, wall_s=0.0, started=datetime.now(UTC))

    monkeypatch.setattr(sweep, "collect_fingerprint", lambda names, threads: {"cpu_model": "test"})
    monkeypatch.setattr(sweep, "run_case", fake_case)
    return ran


def test_serve_ends_with_one_line_per_case_and_points_at_the_report(dlperf_main, stored_format, tmp_path: Path):
    res = dlperf_main("serve", "lenet5", "--quick", "--framework", "torch", "--threads", "1", db=tmp_path / "s.db")
    assert res.returncode == 0, res.stderr
    assert len(stored_format) == 2
    lines = res.stdout.splitlines()
    from dlperf.units import format_time

    assert (f"torch cpu lenet5 single-stream: VALID, p90 latency: {format_time(0.000412)} (shortened: below MLPerf's "
            f"rules)") in lines
    assert ("torch cpu lenet5 server: INVALID (latency constraint not met), completed samples/s: 26,040; "
            "search: highest valid rate 640 queries/s of 2 probes (shortened: below MLPerf's rules)") in lines
    run_id = next(line.split()[2] for line in lines if line.startswith("results: run "))
    assert any(line.startswith(f"next: dlperf report {run_id}") for line in lines)
    assert "median" not in res.stdout  # a driven case's progress line is LoadGen's verdict, not a timer's


def test_a_run_with_an_override_is_never_resumed_without_it(dlperf_main, stored_format, tmp_path, monkeypatch):
    from dlperf.runner import sweep

    db = tmp_path / "s.db"
    base = ("serve", "lenet5", "--quick", "--framework", "torch", "--threads", "1")
    stop_after_one = sweep.run_case

    def interrupt_second(case, *args, **kwargs):
        if len(stored_format) == 1:
            raise KeyboardInterrupt
        return stop_after_one(case, *args, **kwargs)

    monkeypatch.setattr(sweep, "run_case", interrupt_second)
    res = dlperf_main(*base, "--min-duration-s", "1", db=db)
    assert res.returncode == 130 and "interrupted: 1 of 2 cases" in res.stderr
    monkeypatch.setattr(sweep, "run_case", stop_after_one)
    interrupted = next(w for w in res.stderr.split() if w.startswith("serving-"))

    without = dlperf_main(*base, db=db)  # the study's own duration: another run, started afresh
    assert without.returncode == 0 and "resuming" not in without.stdout and "2 cases of study serving" in without.stdout
    refused = dlperf_main(*base, "--resume", interrupted, db=db)
    assert_one_line_error(refused, "was started with other models, scenarios or overrides")
    again = dlperf_main(*base, "--min-duration-s", "1", db=db)  # the same words: the interrupted run resumes
    assert again.returncode == 0 and f"resuming run {interrupted}: 1 of 2 cases already stored" in again.stdout


def test_an_unconfirmed_best_rate_says_so():
    """A search whose best VALID probe no run without the probes' cap confirmed is printed as such."""
    from dlperf.cli.serve import case_line
    from dlperf.core.result import CaseResult
    from dlperf.report.serving_text import UNCONFIRMED

    def row(confirmed: bool) -> CaseResult:
        params = {"workload": "cnn", "model": "lenet5", "scenario": "server", "min_duration_s": 2}
        metrics = _loadgen(params)
        metrics["server_search"]["confirmed"] = confirmed
        return CaseResult.model_validate({
            "run_id": "r", "case_key": "k", "repetition": 0, "workload": "serve", "framework": "torch", "env_id": 1,
            "device": "cpu", "params": params, "status": "ok", "metrics": metrics,
            "started_at": datetime.now(UTC), "finished_at": datetime.now(UTC)})

    assert UNCONFIRMED in case_line(row(False))
    assert UNCONFIRMED not in case_line(row(True))


def test_a_search_that_tried_no_rate_says_why_in_both_lines(dlperf_main, monkeypatch, tmp_path):
    """A Server case whose search stopped before any probe (no loadgen key): the progress line and the closing
    line say `search: no rate tried (<why>)`, never a timer's median nor "no LoadGen result stored"."""
    from dlperf.runner import sweep

    why = "no rate can be VALID: the latency bound 0.001 ms is below one predict call (2 ms)"

    def fake_case(case, settings, run_id, env_id, counters=False):
        metrics = (_loadgen(case.params) if case.params["scenario"] != "server" else
                   {"server_search": {"target_latency_s": 1e-6, "percentile": 0.99, "probes": [], "best_qps": None,
                                      "stopped": why}})
        return sweep.result_row(case, {"status": "ok", "measurement": None, "metrics": metrics}, run_id, env_id,
                                wall_s=0.0, started=datetime.now(UTC))

    monkeypatch.setattr(sweep, "collect_fingerprint", lambda names, threads: {"cpu_model": "test"})
    monkeypatch.setattr(sweep, "run_case", fake_case)
    res = dlperf_main("serve", "lenet5", "--quick", "--framework", "torch", "--threads", "1", "--scenario", "server",
                      db=tmp_path / "s.db")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert f"torch cpu lenet5 server: search: no rate tried ({why})" in lines
    flat = " ".join(res.stdout.split())  # the progress line wraps at the console's width
    assert "[1/1] " in flat and f": ok search: no rate tried ({why}) " in flat, flat
    assert "median" not in res.stdout and "n=None" not in res.stdout


def test_a_failure_reason_is_printed_whole():
    from dlperf.cli.serve import case_line
    from dlperf.core.result import CaseResult

    reason = ("DLPERF_CPU_CLOCK_GHZ='fast' is not a number: set it to the CPU's clock in GHz (e.g. 3.5), or unset it "
              "to read the clock from the machine")
    row = CaseResult.model_validate({
        "run_id": "r", "case_key": "k", "repetition": 0, "workload": "serve", "framework": "torch", "env_id": 1,
        "device": "cpu", "params": {"model": "lenet5", "scenario": "server"}, "status": "error", "reason": reason,
        "started_at": datetime.now(UTC), "finished_at": datetime.now(UTC)})
    assert case_line(row) == f"torch cpu lenet5 server: error: {reason}"


def test_resume_of_another_study_or_selection_is_one_line_before_anything(dlperf_main, stored_format, tmp_path):
    """--resume with a run of another study, or of the serving study with other words: one line naming what
    differs, exit 2, no "threads:" line, nothing run."""
    db = tmp_path / "s.db"
    base = ("serve", "lenet5", "--quick", "--framework", "torch", "--threads", "1")
    first = dlperf_main(*base, "--min-duration-s", "1", db=db)
    assert first.returncode == 0, first.stderr
    run_id = next(line.split()[2] for line in first.stdout.splitlines() if line.startswith("results: run "))
    ran = len(stored_format)
    res = dlperf_main(*base, "--resume", run_id, db=db)
    assert_one_line_error(res, f"--resume {run_id}: run {run_id} was started with other models, scenarios or "
                               "overrides")
    assert res.returncode == 2 and "threads:" not in res.stdout and len(stored_format) == ran
    res = dlperf_main("serve", "lenet5", "--framework", "torch", "--resume", run_id, db=db)
    assert_one_line_error(res, "was started with --quick")
    res = dlperf_main("serve", "--quick", "--resume", "nosuchrun", db=db)
    assert_one_line_error(res, "--resume nosuchrun: unknown run 'nosuchrun'")
    assert "threads:" not in res.stdout
