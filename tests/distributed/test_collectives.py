"""The `collectives` workload: nccl-tests' bandwidth definitions with worked numbers, its parameters, the rank's
plan and output check (no job), the shipped study, and one real run of a tiny study through the CLI (one 2-rank
gloo job) whose stored figures are recomputed from its stored samples."""

from __future__ import annotations

import math
import warnings

import pytest
from pydantic import ValidationError

from dlperf.core.status import CaseEnded
from dlperf.distributed import collectives_rank as cr
from dlperf.distributed.bandwidth import bandwidths, bus_factor
from dlperf.distributed.launch import JobOutcome
from dlperf.store import Store
from dlperf.studies import load_study
from dlperf.timing.measurement import Measurement
from dlperf.workloads.collectives import CollectivesParams
from tests.conftest import STUDIES, run_cli

pytestmark = pytest.mark.timeout(180)

GIB = 2**30


# -- nccl-tests' definitions (doc/PERFORMANCE.md) ---------------------------------------------------------------

def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8 == 1.75
    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("all_reduce", 1) == 0.0  # one rank moves nothing over a bus
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == 0.75
    assert bus_factor("broadcast", 8) == 1.0
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("all_to_all", 2)


def test_bandwidths_worked_numbers():
    # all-reduce of 1 GiB on 4 ranks in 0.1 s: algbw 10.74 GB/s; busbw x 2(4-1)/4 = 1.5: 16.11 GB/s
    algbw, busbw = bandwidths("all_reduce", GIB, 4, 0.1)
    assert algbw == pytest.approx(10.737418e9) and busbw == pytest.approx(16.106127e9)
    # all-gather whose gathered output S is 256 MiB on 8 ranks (32 MiB each) in 20 ms: 13.42 GB/s, x 7/8
    algbw, busbw = bandwidths("all_gather", 256 * 2**20, 8, 0.02)
    assert algbw == pytest.approx(13.421773e9) and busbw == pytest.approx(11.744051e9)
    # reduce-scatter of a 4 MiB input on 2 ranks in 1 ms: busbw half of algbw; broadcast: equal
    assert bandwidths("reduce_scatter", 4 * 2**20, 2, 1e-3) == pytest.approx((4.194304e9, 2.097152e9))
    assert bandwidths("broadcast", 4096, 2, 1e-5) == pytest.approx((409.6e6, 409.6e6))
    with pytest.raises(ValueError, match="positive time"):
        bandwidths("broadcast", 4096, 2, 0.0)


# -- parameters -------------------------------------------------------------------------------------------------

def test_params_need_whole_elements_split_evenly_over_the_ranks():
    assert CollectivesParams(op="all_gather", size_bytes=24, world_size=3).elements == 6
    assert CollectivesParams(op="all_reduce", size_bytes=6, world_size=3, dtype="float16").elements == 3
    with pytest.raises(ValidationError, match="multiple of 12"):
        CollectivesParams(op="reduce_scatter", size_bytes=16, world_size=3)  # 4 floats over 3 ranks
    with pytest.raises(ValidationError, match="multiple of 2"):
        CollectivesParams(op="broadcast", size_bytes=3, world_size=2, dtype="bfloat16")
    with pytest.raises(ValidationError):
        CollectivesParams(op="all_reduce", size_bytes=4096, world_size=2, nodes=2)  # one node per case


# -- the rank's plan and check (no job) -------------------------------------------------------------------------

def test_plan_steps_means_single_call_samples():
    assert cr.plan(0.5, steps=7, budget_s=1.0, min_run_time_s=0.2) == (1, 7, "steps")


def test_plan_blocks_fill_the_minimum_block_and_the_budget_bounds_the_samples():
    # 100 us calls: 10 ms blocks of 100 calls (and 0.2 s / 20 samples = 10 ms too), all 20 samples fit in 1 s
    assert cr.plan(1e-4, steps=None, budget_s=1.0, min_run_time_s=0.2) == (100, 20, "samples")
    # min_run_time_s 2 s: blocks of 100 ms
    assert cr.plan(1e-4, steps=None, budget_s=5.0, min_run_time_s=2.0) == (1000, 20, "samples")
    # 0.3 s calls, 2 s budget: 6 single-call samples fit
    assert cr.plan(0.3, steps=None, budget_s=2.0, min_run_time_s=0.2) == (1, 6, "budget")
    # calls longer than the budget: still the fewest samples a median needs
    assert cr.plan(3.0, steps=None, budget_s=2.0, min_run_time_s=0.2) == (1, cr.MIN_SAMPLES, "budget")
    # a costly timer (50 us per sample) asks for blocks of 50 ms
    assert cr.plan(1e-3, steps=None, budget_s=10.0, min_run_time_s=0.0, overhead_s=5e-5)[0] == 50


def _fake(op: str, peer_fill: float):
    """What rank 0 of 2 sees from `op` when its peer (rank 1) holds `peer_fill`-scaled inputs, done right."""
    import torch

    def call(inp, out):
        if op == "all_reduce":
            out.add_(torch.full_like(out, peer_fill))
        elif op == "broadcast":
            pass  # rank 0 is the root: it keeps its own values
        elif op == "all_gather":
            out.copy_(torch.cat([inp, torch.full_like(inp, peer_fill)]))
        else:  # reduce_scatter: rank 0 receives chunk 0 summed; the peer's chunk 0 holds peer_fill x 1
            out.copy_(inp.view(2, -1)[0] + peer_fill)
    return call


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_check_accepts_the_right_output_and_names_a_wrong_one(op):
    inp, out = cr.buffers(op, 8, 2, _torch().float32, "cpu")
    right = _fake(op, 2.0)
    assert cr.check(op, inp, out, lambda: right(inp, out), rank=0, world_size=2) is None
    if op == "broadcast":
        wrong = lambda: out.fill_(2.0)  # (the root's values overwritten by the peer's)
    else:
        wrong = lambda: _fake(op, 3.0)(inp, out)  # (the peer's values counted wrong)
    problem = cr.check(op, inp, out, wrong, rank=0, world_size=2)
    assert problem is not None and problem.startswith("rank 0: ") and "expected" in problem


def _torch():
    import torch

    return torch


def test_the_four_collectives_run_on_gloo_under_their_current_names(tmp_path):
    """One process, world size 1: the calls torch.distributed makes exist, are not deprecated, and check right."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a FutureWarning (deprecated name) fails the test
            for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
                inp, out = cr.buffers(op, 16, 1, _torch().float32, "cpu")
                call = cr.collective(op, inp, out)
                assert cr.check(op, inp, out, call, rank=0, world_size=1) is None, op
    finally:
        dist.destroy_process_group()


def test_a_wrong_output_ends_the_case_error_not_ok(monkeypatch):
    from dlperf.core.settings import RunSettings
    from dlperf.distributed import collectives, launch

    ranks = [{"rank": 0, "status": "ok", "checked": False, "problems": ["rank 1: 4 of 4 elements wrong"]},
             {"rank": 1, "status": "ok", "checked": False}]
    monkeypatch.setattr(launch, "launch", lambda *a, **k: JobOutcome("ok", None, ranks, 2, 1.0, ["torchrun"]))
    params = CollectivesParams(op="all_reduce", size_bytes=16, world_size=2)
    with pytest.raises(CaseEnded) as info:
        collectives.drive(None, "cpu", params, None, RunSettings(threads=1))
    assert info.value.status == "error"
    assert info.value.reason == "collective output wrong: rank 1: 4 of 4 elements wrong"


# -- the shipped study ------------------------------------------------------------------------------------------

def test_the_study_sweeps_sizes_world_sizes_and_both_devices_and_quick_is_small():
    full = load_study("collectives")
    sizes = sorted({c.params["size_bytes"] for c in full.cases})
    assert sizes[0] == 4 * 2**10 and sizes[-1] == 256 * 2**20 and len(sizes) == 9
    assert {c.device for c in full.cases} == {"cpu", "cuda"} and {c.framework for c in full.cases} == {"torch"}
    assert {c.params["world_size"] for c in full.cases} == {1, 2, 4, 8}
    assert not full.settings.energy
    quick = load_study("collectives", quick=True)
    assert len(quick.cases) == 5 and {c.device for c in quick.cases} == {"cpu"}
    assert {c.params["world_size"] for c in quick.cases} == {2}
    assert {c.params["op"] for c in quick.cases} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}


# -- one real run through the CLI -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    db = tmp_path_factory.mktemp("collectives") / "r.sqlite"
    result = run_cli("run", str(STUDIES / "collectives_tiny.yaml"), db=db, timeout=150)
    store = Store(db)
    run_id = store.runs_of_study("collectives_tiny")[0].id
    return result, store.results(run_id)


def test_a_tiny_study_runs_and_stores_its_collective(tiny):
    result, rows = tiny
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert len(rows) == 1
    r = rows[0]
    assert r.status == "ok", r.reason
    m = Measurement.from_dict(r.measurement)  # the raw samples as stored
    c = r.m.get("collective")
    assert c["op"] == "all_reduce" and c["size_bytes"] == 65536 and c["world_size"] == 2
    assert c["backend"] == "gloo" and c["dtype"] == "float32" and c["checked"] is True
    assert m.n_samples >= cr.MIN_SAMPLES and set(m.sample_iters) == {c["iters_per_sample"]}
    assert m.timer == "perf_counter" and m.first_call_s > 0 and m.warmup_iters >= cr.CALIBRATION_CALLS
    # the stored bandwidths are nccl-tests' from the median of the stored samples, recomputed here
    median_s = m.median_s
    assert c["algbw_bytes_per_s"] == pytest.approx(65536 / median_s, rel=1e-9)
    assert c["bus_factor"] == 1.0 and c["busbw_bytes_per_s"] == pytest.approx(c["algbw_bytes_per_s"] * 1.0)
    assert r.m.get("bytes_per_s") == pytest.approx(c["algbw_bytes_per_s"], rel=1e-9)  # the cost counts S
    assert [x["rank"] for x in c["ranks"]] == [0, 1] and all(x["pid"] for x in c["ranks"])
    assert c["launcher"]["wall_s"] > 0 and "--nproc-per-node=2" in c["launcher"]["command"]
    assert r.m.get("busy_threads") == 2 and math.isfinite(m.cpu_util)
    # memory: the ranks' (the worker only waited), the largest rank's peak RSS; no device allocator on CPUs
    assert r.m.peak_rss_bytes == max(x["peak_rss_bytes"] for x in c["ranks"]) > 0
    assert r.m.peak_device_mem_bytes is None and "metrics['collective']['ranks']" in r.m.peak_device_mem_source


def test_more_ranks_than_gpus_is_unsupported_before_any_job():
    from dlperf.distributed.launch import check_job
    from dlperf.frameworks import UnsupportedError

    with pytest.raises(UnsupportedError, match="GPUs|nccl"):  # no NCCL in a CPU build; else too few GPUs
        check_job("cuda", 4096)


def test_a_size_that_does_not_split_over_the_ranks_is_a_one_line_error(tmp_path):
    study = tmp_path / "bad.yaml"
    study.write_text((STUDIES / "collectives_tiny.yaml").read_text().replace("op: all_reduce", "op: all_gather")
                     .replace("size_bytes: 65536", "size_bytes: 65540"))
    result = run_cli("run", str(study), db=tmp_path / "r.sqlite")
    assert result.returncode != 0 and not result.stdout.strip()
    assert len(result.stderr.strip().splitlines()) == 1 and "multiple of 8" in result.stderr, result.stderr
