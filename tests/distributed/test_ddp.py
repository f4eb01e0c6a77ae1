"""The `ddp` workload: DDP on gloo ranks computes what one process computes on the whole batch, and a tiny study
runs end to end into the store with the stored format (`dlperf.distributed.ddp`). Three torchrun jobs in all."""

from __future__ import annotations

import statistics

import pytest

from dlperf.core.settings import RunSettings
from dlperf.distributed.ddp import job_steps, measurement, rank_payload
from dlperf.distributed.ddp_profile import combine
from dlperf.distributed.launch import JobOutcome, launch
from dlperf.errors import StudyError
from dlperf.runner.sweep import run_study
from dlperf.store import Store
from dlperf.studies import load_study
from dlperf.workloads.base import Workload
from dlperf.workloads.ddp import DdpParams
from tests.conftest import STUDIES

DDP_KEYS = {"world_size", "nodes", "nproc_per_node", "backend", "scaling", "global_batch", "batch_per_rank",
            "threads_per_rank", "sample_unit", "warmup_steps", "steps_timed", "rank_step_s_median", "comm", "ranks",
            "launcher"}
COMM_KEYS = {"source", "profiled_steps", "comm_s_per_step", "comm_s_per_step_max", "comm_rank", "step_s_profiled",
             "comm_fraction", "events", "note", "per_rank"}


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


def _rank(start, ends, own=None, cpu=None):
    """A rank's result as `ddp_rank.run` returns it (only what `measurement` reads)."""
    own = own or [b - a for a, b in zip([start, *ends], ends, strict=False)]
    return {"loop_start_s": start, "step_end_s": ends, "step_s": own, "cpu_s": cpu or [0.001] * len(ends),
            "warmup_step_s": [0.02], "first_call_s": 0.5, "stop_reason": "steps: 3"}


def test_a_step_of_the_job_ends_when_its_last_rank_ends_it_and_the_steps_add_up_to_the_span():
    # Lockstep: rank 1 finishes steps 0 and 2 late (2 ms), rank 0 waits for it in the next step's all-reduce, so
    # rank 1's own step 1 is short (8 ms). The ranks' own durations: rank 0 10, 10, 10; rank 1 12, 8, 12.
    ranks = [_rank(100.000, [100.010, 100.020, 100.030]), _rank(100.000, [100.012, 100.020, 100.032])]
    steps = job_steps(ranks)
    assert steps == pytest.approx((0.012, 0.008, 0.012))
    assert sum(steps) == pytest.approx(100.032 - 100.000)  # the job's span: the barrier to the last rank's end
    # the slowest rank's own duration per step would give 12, 10, 12: rank 0's wait in step 1 counted twice
    assert sum(max(r["step_s"][i] for r in ranks) for i in range(3)) == pytest.approx(0.034)
    m = measurement(ranks)
    assert m.sample_times_s == steps and m.sample_iters == (1, 1, 1)
    assert m.first_call_s == 0.5 and m.warmup_iters == 1


def test_a_steps_cpu_is_every_ranks_so_validity_counts_every_rank_busy():
    """Two ranks each busy 95% of every step: the job keeps ~2 cores busy, and a machine of 2 cores with 0.3 of
    another process's on top is oversubscribed; rank 0's CPU alone would have said one core (not contended)."""
    from dlperf.core.validity import assess

    ends = [100.0 + 0.0128 * (i + 1) for i in range(20)]
    ranks = [_rank(100.0, ends, cpu=[0.95 * 0.0128] * 20) for _ in range(2)]
    m = measurement(ranks)
    assert m.sample_cpu_s == pytest.approx([2 * 0.95 * 0.0128] * 20) and m.cpu_util == pytest.approx(1.9)
    activity = {"cores": 2, "windows": {"during": {"others_cores": 0.3}}}
    assert assess(m, activity, threads=2, device="cpu")[0] == "contended"


def test_the_jobs_first_step_starts_when_the_last_rank_left_the_barrier():
    ranks = [_rank(10.0, [10.5, 11.0]), _rank(10.1, [10.4, 11.2])]  # rank 1 left the barrier 0.1 s later
    assert job_steps(ranks) == pytest.approx((0.4, 0.7))
    assert sum(job_steps(ranks)) == pytest.approx(11.2 - 10.1)
    with pytest.raises(RuntimeError, match="different numbers of steps"):
        job_steps([_rank(10.0, [10.5, 11.0]), _rank(10.0, [10.5])])


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
        assert len(d["rank_step_s_median"]) == world and all(s > 0 for s in d["rank_step_s_median"])
        assert all(t > 0 for t in m["sample_times_s"]) and sum(m["sample_times_s"]) < d["launcher"]["wall_s"]


def test_tiny_study_stores_the_ranks_memory_not_the_workers(tiny_run):
    for r in tiny_run.values():
        ranks = r.m.get("ddp")["ranks"]
        assert all(x["peak_rss_bytes"] > 0 and x["peak_device_mem_bytes"] is None for x in ranks)  # CPU ranks
        assert r.m.peak_rss_bytes == max(x["peak_rss_bytes"] for x in ranks)
        assert r.m.get("peak_rss_source").startswith("ranks' peak RSS") and r.m.get("worker_peak_rss_bytes") > 0
        assert r.m.peak_device_mem_bytes is None
        assert "measured per rank: metrics['ddp']['ranks']" in r.m.peak_device_mem_source


def test_the_case_takes_the_largest_ranks_device_peak():
    ranks = [{"rank": 0, "peak_rss_bytes": 5, "peak_device_mem_bytes": 300},
             {"rank": 1, "peak_rss_bytes": 7, "peak_device_mem_bytes": 200}]
    out = JobOutcome("ok", None, ranks, 2, 1.0, ["torchrun"]).footprint("metrics['ddp']['ranks']")
    assert out["peak_rss_bytes"] == 7 and out["peak_device_mem_bytes"] == 300
    assert out["peak_device_mem_source"].startswith("ranks' allocator peak (max)")


class _NoDeviceFramework:
    """A framework whose device memory must not be touched: a torchrun case's worker never creates a context."""

    def reset_peak_memory(self, device):
        raise AssertionError("the worker reset the device allocator of a case run in its own processes")

    def peak_memory_bytes(self, device):
        raise AssertionError("the worker read the device allocator of a case run in its own processes")

    def threads(self):
        return 1


class _OwnProcesses(Workload):
    name = "own_processes_test"
    runs_in_own_processes = True

    def drive(self, fw, device, params, step, settings):
        return {"busy_threads": 2, "peak_rss_bytes": 123, "peak_rss_source": "ranks' peak RSS"}


def test_the_worker_never_touches_the_device_of_a_case_run_in_its_own_processes():
    from dlperf.runner import worker
    from dlperf.runner.driven import RANKS_MEMORY, run_driven

    fw = _NoDeviceFramework()
    metrics, measured = run_driven(fw, "cuda:0", _OwnProcesses(), None, None, RunSettings(energy=False))
    assert measured is None
    out = metrics | worker._footprint(fw, "cuda:0", 1000, metrics)
    assert out["peak_rss_bytes"] == 123 and out["peak_rss_source"] == "ranks' peak RSS"
    assert out["peak_device_mem_bytes"] is None and out["peak_device_mem_source"] == RANKS_MEMORY
    assert out["worker_peak_rss_bytes"] > 0 and out["baseline_rss_bytes"] == 1000


def test_tiny_study_measures_communication(tiny_run):
    comm = tiny_run[2].m.get("ddp")["comm"]
    assert comm["source"] == "torch.profiler" and comm["profiled_steps"] == 3
    assert set(comm["events"]) == {"gloo:all_reduce"} and comm["comm_s_per_step"] > 0
    assert comm["comm_s_per_step"] == pytest.approx(sum(comm["events"].values()))
    assert comm["comm_fraction"] == pytest.approx(comm["comm_s_per_step"] / comm["step_s_profiled"])
    assert "overlaps" in comm["note"] and "smallest over the ranks" in comm["note"]
    per_rank = comm["per_rank"]   # every rank's own figures; the case's: the smallest, the largest beside it
    assert [x["rank"] for x in per_rank] == [0, 1] and all(x["comm_s_per_step"] > 0 for x in per_rank)
    assert comm["comm_s_per_step"] == min(x["comm_s_per_step"] for x in per_rank)
    assert comm["comm_s_per_step_max"] == max(x["comm_s_per_step"] for x in per_rank)
    assert per_rank[comm["comm_rank"]]["comm_s_per_step"] == comm["comm_s_per_step"]
    one = tiny_run[1].m.get("ddp")["comm"]   # one rank: DDP still calls gloo's all-reduce, with nobody
    assert one["comm_s_per_step"] is not None and "world size 1" in one["note"]


def test_the_cases_comm_is_the_rank_that_waited_least_with_the_largest_beside_it():
    """One real job's figures (rank 0 0.45 ms, rank 1 5.52 ms: rank 0 reached the all-reduces last and waited
    least): comm_s_per_step is rank 0's, comm_s_per_step_max rank 1's; the profiled step is the job's."""
    def rank(comm_s, ends):
        return {"source": "torch.profiler", "profiled_steps": 3, "comm_s_per_step": comm_s, "step_s_profiled": 0.02,
                "comm_fraction": comm_s / 0.02, "events": {"gloo:all_reduce": comm_s}, "note": "own note",
                "step_end_s": ends}

    comm = combine([rank(0.00045, [1.000, 1.014, 1.028]), rank(0.00552, [1.001, 1.016, 1.029])], "gloo")
    assert set(comm) == COMM_KEYS
    assert comm["comm_s_per_step"] == 0.00045 and comm["comm_rank"] == 0 and comm["comm_s_per_step_max"] == 0.00552
    assert comm["events"] == {"gloo:all_reduce": 0.00045}
    assert comm["step_s_profiled"] == pytest.approx(0.014)  # the job's steps after the first: 15 and 13 ms
    assert comm["comm_fraction"] == pytest.approx(0.00045 / 0.014)
    assert [x["comm_s_per_step"] for x in comm["per_rank"]] == [0.00045, 0.00552]
    assert "smallest over the ranks (comm_rank names it" in comm["note"] and "gloo's thread blocks" in comm["note"]
    nccl = combine([rank(0.002, [1.0]), rank(0.001, [1.0])], "nccl")
    assert nccl["comm_rank"] == 1 and "spin" in nccl["note"] and nccl["step_s_profiled"] == 0.02


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
