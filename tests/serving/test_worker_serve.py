"""A serve case through the worker (`runner.worker.run_case`): driven by LoadGen, not timed; its row loads, shows
and exports with `measurement` None. The served step is the fake 2 ms one (no real model builder is needed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from dlperf.core.jobs import CaseJob, CaseSpec
from dlperf.core.result import CaseResult
from dlperf.core.settings import RunSettings
from dlperf.runner.worker import run_case
from dlperf.store import Store
from dlperf.workloads import REGISTRY
from dlperf.workloads.serve import Serve
from tests.conftest import run_cli
from tests.serving.fakes import sleeping_step

pytestmark = pytest.mark.timeout(120)

PARAMS = {"workload": "cnn", "model": "alexnet", "scenario": "single-stream", "max_batch": 2,
          "min_duration_s": 1.0, "min_query_count": 64}


class FakeServe(Serve):
    """The serve workload with the fake step in place of a model's inference step."""

    def build(self, fw, device, params):
        return sleeping_step()


class NoMetricsServe(FakeServe):
    """A driven workload whose drive returns None: it must not then be timed as well."""

    calls = 0

    def drive(self, fw, device, params, step, settings):
        NoMetricsServe.calls += 1
        return None


@pytest.fixture
def served(monkeypatch):
    monkeypatch.setitem(REGISTRY, "serve", FakeServe)
    job = CaseJob(case=CaseSpec(workload="serve", framework="numpy", device="cpu", params=PARAMS),
                  settings=RunSettings(threads=1, profile=True))
    return run_case(job)


def test_a_serve_case_is_driven_not_timed(served):
    assert served["status"] == "ok", served.get("reason")
    assert served["measurement"] is None
    m = served["metrics"]
    assert m["loadgen"]["scenario"] == "SingleStream" and m["loadgen"]["validity"] in ("VALID", "INVALID")
    assert m["samples_per_s"] == m["loadgen"]["results"]["result_qps_with_loadgen_overhead"]
    assert "median_s" not in m and m["sut"]["batches"] > 0
    assert set(m["activity"]["windows"]) == {"before", "during", "after"}
    assert m["validity"] in ("valid", "contended")
    assert m["threads"] == 1 and m["device"] == "cpu" and m["peak_rss_bytes"] > 0
    # energy and profile were asked for (energy by default, profile here): said, not dropped
    assert m["energy"]["measured"] is False and "driven" in m["energy"]["reason"]
    assert "profile" not in m and "no profile" in m["profile_note"]
    assert m["loadgen"]["activity"]["wall_s"] > 0  # the LoadGen run's own activity window
    if m["samples_per_s"] is None:
        assert m["samples_per_s_reason"]
    json.dumps(served)  # the worker writes it as JSON


def test_a_drive_that_returns_nothing_is_an_error_not_a_timed_case(monkeypatch):
    monkeypatch.setitem(REGISTRY, "serve", NoMetricsServe)
    NoMetricsServe.calls = 0
    job = CaseJob(case=CaseSpec(workload="serve", framework="numpy", device="cpu", params=PARAMS),
                  settings=RunSettings(threads=1))
    result = run_case(job)
    assert result["status"] == "error" and "returned no metrics" in result["reason"]
    assert NoMetricsServe.calls == 1 and result.get("measurement") is None


def test_a_serve_row_loads_shows_and_exports(served, tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    env_id = store.environment_id({"cpu_model": "x"}, "hash-x")
    run_id = store.create_run(study="serve", variant="quick", study_hash="h", study_path="p", filters={},
                              settings={}, env_id=env_id, n_cases=1, dlperf_version="0")
    now = datetime.now(UTC)
    row = {"run_id": run_id, "case_key": "serve/x", "repetition": 0, "workload": "serve", "framework": "numpy",
           "device": "cpu", "params": PARAMS, "env_id": env_id, "wall_s": 2.0, "started_at": now,
           "finished_at": now} | served
    result = CaseResult.from_row(row)
    assert result.ok and result.measurement is None
    assert result.m.get("loadgen")["validity"] == served["metrics"]["loadgen"]["validity"]
    assert result.m.validity == served["metrics"]["validity"]
    store.add_result(result)
    loaded = store.results(run_id)[0]
    assert loaded.m.get("server_search") is None and loaded.m.get("sut")["max_batch"] == 2
    shown = run_cli("show", run_id, db=db)
    assert shown.returncode == 0 and not shown.stderr, shown.stderr
    exported = run_cli("export", run_id, "--format", "json", db=db)
    assert exported.returncode == 0 and not exported.stderr, exported.stderr
    assert "SingleStream" in exported.stdout
    csv = run_cli("export", run_id, db=db)
    assert csv.returncode == 0 and not csv.stderr, csv.stderr
