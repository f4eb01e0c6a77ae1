"""The shipped `serving` study (issue 17): what its full and quick variants expand to, and that the quick variant's
shortened counts still let LoadGen's early stopping decide."""

from __future__ import annotations

import math

import pytest

from dlperf.studies import load_study
from dlperf.workloads.serve import SCENARIOS, ServeParams


@pytest.fixture(scope="module")
def full():
    return load_study("serving")


@pytest.fixture(scope="module")
def quick():
    return load_study("serving", quick=True)


def test_both_variants_load_as_the_serve_workload(full, quick):
    assert full.name == quick.name == "serving" and full.workload == quick.workload == "serve"
    assert full.study_hash != quick.study_hash
    assert not full.settings.energy and not quick.settings.energy  # a LoadGen run is not a metered repeated call


def test_full_case_count(full):
    # cnn: 3 models x 4 scenarios on torch, onnxruntime, tensorflow (cpu and cuda) and openvino (cpu);
    # transformer: 2 models x 4 scenarios on those and jax (cpu and cuda), and numpy (cpu).
    assert len(full.cases) == 3 * 4 * (3 * 2 + 1) + 2 * 4 * (4 * 2 + 1 + 1) == 164
    assert {c.params["scenario"] for c in full.cases} == set(SCENARIOS)
    assert {c.params["model"] for c in full.cases} == {"alexnet", "googlenet", "lenet5", "gpt2-small", "bert-base"}
    assert not any(c.framework in ("jax", "numpy") and c.params["workload"] == "cnn" for c in full.cases)
    assert not any(c.framework in ("openvino", "numpy") and c.device == "cuda" for c in full.cases)


def test_full_keeps_mlperfs_durations_and_states_each_server_bound(full):
    for case in full.cases:
        p = ServeParams.model_validate(case.params)
        assert p.min_duration_s == 600 and p.min_query_count is None, case.key
        if p.scenario == "server":
            # borrowed: MLPerf ResNet50-v1.5 Server 15 ms for the classifiers, BERT-Large Server 130 ms
            assert p.target_latency_ms == (15 if p.workload == "cnn" else 130), case.key
            assert p.target_qps is None  # the highest valid rate is searched
    assert full.settings.timeout_s >= 8 * 600  # a search of up to 8 probes of at least 600 s each


def test_quick_case_count_and_its_only_frameworks_and_scenarios(quick):
    assert len(quick.cases) == 2 * 2 * 2  # (torch, onnxruntime) x (lenet5, gpt2-tiny) x (single-stream, server)
    assert {c.framework for c in quick.cases} == {"torch", "onnxruntime"}
    assert {c.params["scenario"] for c in quick.cases} == {"single-stream", "server"}
    assert {c.device for c in quick.cases} == {"cpu"}
    assert {c.params["model"] for c in quick.cases} == {"lenet5", "gpt2-tiny"}


def _early_stopping_min_queries(overlatency: int, percentile: float, confidence: float = 0.99) -> int:
    """LoadGen's early-stopping minimum (loadgen/early_stopping.cc): the fewest queries h + t such that t or fewer
    over the bound among them happen with probability below 1 - confidence at the percentile."""
    h = 1
    while sum(math.comb(h + overlatency, k) * (1 - percentile) ** k * percentile ** (h + overlatency - k)
              for k in range(overlatency + 1)) >= 1 - confidence:
        h += 1
    return h + overlatency


def test_every_quick_case_parses_and_is_shortened_so_that_early_stopping_can_pass(quick):
    for case in quick.cases:
        p = ServeParams.model_validate(case.params)
        assert ServeParams.model_validate(p.model_dump()).model_dump() == p.model_dump()
        assert p.min_duration_s < 600 and p.min_query_count is not None  # shortened, and labelled so by the driver
        if p.scenario == "single-stream":
            assert p.max_batch == 1
            assert p.min_query_count >= _early_stopping_min_queries(1, 0.90)  # 64: LoadGen's p90 estimate
        else:
            assert p.target_latency_ms is not None and p.search_probes <= 6
            assert p.min_query_count >= _early_stopping_min_queries(2, 0.99)  # 838: two queries over the bound
    assert quick.settings.timeout_s >= 6 * 10  # six probes of a few seconds each, with the worker's start


def test_the_early_stopping_minimum_is_loadgens():
    # The counts LoadGen prints ("would need to process at least 662 total queries" for a p99 estimate).
    assert _early_stopping_min_queries(0, 0.99) == 459
    assert _early_stopping_min_queries(1, 0.99) == 662
    assert _early_stopping_min_queries(1, 0.90) == 64
