"""The `ddp` workload: DDP on gloo ranks computes what one process computes on the whole batch, and a tiny study
runs end to end into the store with the stored format (`dlperf.distributed.ddp`). Three torchrun jobs in all."""

from __future__ import annotations

import statistics

import pytest

from dlperf.core.settings import RunSettings
from dlperf.distributed.ddp import rank_payload
from dlperf.distributed.launch import launch
from dlperf.errors import StudyError
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.studies import load_study
from dlperf.workloads.ddp import DdpParams
from tests.conftest import STUDIES

DDP_KEYS = {"world_size", "nodes", "nproc_per_node", "backend", "scaling", "global_batch", "batch_per_rank",
            "threads_per_rank", "sample_unit", "warmup_steps", "steps_timed", "rank_step_s_median", "comm", "ranks",
            "launcher"}
COMM_KEYS = {"source", "profiled_steps", "comm_s_per_step", "step_s_profiled", "comm_fraction", "events", "note"}


def test_two_ranks_on_half_batches_train_as_one_process_on_the_whole_batch():
    """The house's correctness rule for DDP: 2 gloo ranks, 4 images each, SGD with momentum for 2 steps, against
    one plain model trained on all 8 images in the rank itself (`ddp_rank`'s test-only `check`)."""
    params = DdpParams(workload="cnn", model="lenet5", world_size=2, batch=8)
    payload = rank_payload(params, RunSettings()) | {"check": "equivalence"}  # test only
    out = launch("ddp", payload, world_size=2, device="cpu", threads_per_rank=1, timeout_s=120)
    assert out.status == "ok", out.reason
    for rank in out.ranks:
        check = rank["check"]
        assert check["global_batch"] == 8 and check["steps"] == 2 and check["params"] == 10
        assert check["max_abs_diff"] < 1e-6                      # float32 rounding, every weight and bias
        assert check["max_abs_update"] > 1e-3                    # the weights did move
        assert check["max_abs_diff_own_shard"] > 1e-3            # and a rank's half batch alone lands elsewhere


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("ddp") / "r.sqlite")
    summary = run_study(load_study(str(STUDIES / "ddp_tiny.yaml")), store)
    return {r.params["world_size"]: r for r in store.results(summary.run_id)}


def test_tiny_study_stores_the_slowest_rank_per_step(tiny_run):
    assert sorted(tiny_run) == [1, 2]
    for world, r in tiny_run.items():
        assert r.status == "ok", r.reason
        d = r.m.get("ddp")
        assert set(d) == DDP_KEYS and set(d["comm"]) == COMM_KEYS
        assert (d["world_size"], d["nproc_per_node"], d["nodes"], d["backend"]) == (world, world, 1, "gloo")
        assert (d["global_batch"], d["batch_per_rank"], d["sample_unit"]) == (8, 8 // world, "image")
        assert [x["rank"] for x in d["ranks"]] == list(range(world)) and d["ranks"][0]["device"] == "cpu"
        assert f"--nproc-per-node={world}" in d["launcher"]["command"] and d["launcher"]["wall_s"] > 0
        m = r.measurement
        n = len(m["sample_times_s"])
        assert n == d["steps_timed"] >= 6 and m["sample_iters"] == [1] * n and len(m["sample_cpu_s"]) == n
        assert m["warmup_iters"] == d["warmup_steps"] == 1
        median = statistics.median(m["sample_times_s"])
        assert r.m.samples_per_s == pytest.approx(8 / median)   # global batch over the median, recomputed
        assert r.m.get("busy_threads") == world
        # a sample is the slowest rank's step, so its median is at least every rank's own median
        assert len(d["rank_step_s_median"]) == world and median >= max(d["rank_step_s_median"]) - 1e-12


def test_tiny_study_measures_communication(tiny_run):
    comm = tiny_run[2].m.get("ddp")["comm"]
    assert comm["source"] == "torch.profiler" and comm["profiled_steps"] == 3
    assert set(comm["events"]) == {"gloo:all_reduce"} and comm["comm_s_per_step"] > 0
    assert comm["comm_s_per_step"] == pytest.approx(sum(comm["events"].values()))
    assert comm["comm_fraction"] == pytest.approx(comm["comm_s_per_step"] / comm["step_s_profiled"])
    assert "overlaps" in comm["note"]
    one = tiny_run[1].m.get("ddp")["comm"]   # one rank: DDP still calls gloo's all-reduce, with nobody
    assert one["comm_s_per_step"] is not None and "world size 1" in one["note"]


def test_a_batch_the_ranks_cannot_share_is_refused_before_anything_runs(tmp_path):
    study = tmp_path / "bad.yaml"
    study.write_text((STUDIES / "ddp_tiny.yaml").read_text().replace("batch: 8", "batch: 9"))
    with pytest.raises(StudyError) as err:
        load_study(str(study))
    assert "multiple of world_size" in str(err.value) and "\n" not in str(err.value)


def test_more_ranks_than_gpus_is_unsupported():
    from dlperf.frameworks import UnsupportedError, get_framework
    from dlperf.workloads.ddp import torch_ddp

    with pytest.raises(UnsupportedError, match="nccl|GPUs"):
        torch_ddp.build(get_framework("torch"), "cuda", DdpParams(workload="cnn", model="lenet5", world_size=3,
                                                                  batch=9))


@pytest.mark.gpu
def test_nccl_world_size_one_times_and_profiles(tmp_path):
    """Where a GPU exists: one NCCL rank trains, times and profiles (the nccl* kernels, if DDP launches any)."""
    params = DdpParams(workload="cnn", model="lenet5", world_size=1, batch=8, profile_steps=2)
    out = launch("ddp", rank_payload(params, RunSettings(budget_s=0.2, warmup=1)), world_size=1, device="cuda",
                 threads_per_rank=1, timeout_s=120)
    assert out.status == "ok", out.reason
    rank = out.ranks[0]
    assert rank["device"] == "cuda:0" and len(rank["step_s"]) >= 6
    assert rank["comm"]["step_s_profiled"] > 0 and rank["comm"]["note"]
