"""A ddp or collectives case's stored job record read as a typed object: every field as stored, a missing or
mistyped key read as absent (never a figure from elsewhere, never a crash), and the stored dict itself left as it
was (an export gives it back unchanged)."""

from __future__ import annotations

import json
from dataclasses import replace

from dlperf.core.payloads import CollectiveMetrics, DdpComm, DdpMetrics
from dlperf.core.result import Metrics

COMM = {"source": "torch.profiler", "profiled_steps": 5, "comm_s_per_step": 0.002, "comm_s_per_step_max": 0.0031,
        "comm_rank": 1, "step_s_profiled": 0.02, "comm_fraction": 0.1, "events": {"gloo:all_reduce": 0.002},
        "note": "gloo: CPU-side time", "per_rank": [{"rank": 0, "comm_s_per_step": 0.0031}]}
DDP = {"world_size": 2, "nodes": 1, "nproc_per_node": 2, "backend": "gloo", "scaling": "strong", "global_batch": 64,
       "batch_per_rank": 32, "threads_per_rank": 1, "sample_unit": "image", "warmup_steps": 3, "steps_timed": 20,
       "rank_step_s_median": [0.021, 0.0205], "comm": COMM, "ranks": [{"rank": 0, "peak_rss_bytes": 1 << 30}],
       "launcher": {"launcher": "torchrun", "exit_code": 0}}
COLLECTIVE = {"op": "all_reduce", "size_bytes": 1 << 20, "world_size": 4, "backend": "gloo", "dtype": "float32",
              "bus_factor": 1.5, "iters_per_sample": 10, "algbw_bytes_per_s": 2.5e9, "busbw_bytes_per_s": 3.75e9,
              "checked": True, "ranks": [{"rank": 0}], "launcher": {"launcher": "torchrun"}}


def test_a_ddp_record_reads_every_field_as_stored() -> None:
    d = Metrics(ddp=DDP).ddp_summary()
    assert d == DdpMetrics(world_size=2, nodes=1, nproc_per_node=2, backend="gloo", scaling="strong",
                           global_batch=64, batch_per_rank=32, threads_per_rank=1, sample_unit="image",
                           warmup_steps=3, steps_timed=20, rank_step_s_median=(0.021, 0.0205),
                           comm=DdpComm(comm_s_per_step=0.002, comm_s_per_step_max=0.0031, step_s_profiled=0.02,
                                        comm_fraction=0.1, comm_rank=1, source="torch.profiler", profiled_steps=5,
                                        note="gloo: CPU-side time"))
    assert Metrics(ddp=DDP).as_dict() == {"ddp": DDP}  # stored as it was, the ranks' records included
    assert json.loads(json.dumps(Metrics(ddp=DDP).as_dict())) == {"ddp": DDP}


def test_a_ddp_record_with_a_missing_or_mistyped_key_reads_it_as_absent() -> None:
    assert Metrics().ddp_summary() is None and DdpMetrics.read("gloo") is None
    assert DdpMetrics.read({}) == DdpMetrics()
    odd = DdpMetrics.read({"world_size": "2", "global_batch": True, "backend": "", "sample_unit": None,
                           "rank_step_s_median": [0.02, "slow", None, 3], "comm": ["not", "a", "dict"]})
    assert odd == DdpMetrics(rank_step_s_median=(0.02, None, None, 3.0))  # each rank keeps its index
    assert DdpMetrics.read({"rank_step_s_median": "0.02"}) == DdpMetrics()
    comm = DdpComm.read({"comm_s_per_step": None, "comm_fraction": "10%", "note": "", "comm_rank": 1.0})
    assert comm == DdpComm()  # none measured: the report prints "-"


def test_a_collective_record_reads_every_field_as_stored() -> None:
    c = Metrics(collective=COLLECTIVE).collective_summary()
    assert c == CollectiveMetrics(op="all_reduce", size_bytes=1 << 20, world_size=4, backend="gloo",
                                  dtype="float32", bus_factor=1.5, iters_per_sample=10, algbw_bytes_per_s=2.5e9,
                                  busbw_bytes_per_s=3.75e9, checked=True)
    assert Metrics(collective=COLLECTIVE).as_dict() == {"collective": COLLECTIVE}
    assert c is not None and CollectiveMetrics.read(COLLECTIVE | {"checked": False}) == replace(c, checked=False)


def test_a_collective_record_with_a_missing_or_mistyped_key_reads_it_as_absent() -> None:
    assert Metrics().collective_summary() is None and CollectiveMetrics.read(7) is None
    assert CollectiveMetrics.read({}) == CollectiveMetrics()
    odd = CollectiveMetrics.read({"op": "all_reduce", "size_bytes": "1 MiB", "bus_factor": "1.5", "checked": "yes",
                                  "algbw_bytes_per_s": None})
    assert odd == CollectiveMetrics(op="all_reduce")  # "yes" is not a check: the report prints "-", not "yes"


def test_the_ddp_report_splits_the_batch_as_the_workload_does() -> None:
    from dlperf.report.ddp_report import batches

    p = {"workload": "cnn", "model": "lenet5", "world_size": 4, "batch": 8}
    assert batches(p) == (8, 2) and batches(p | {"scaling": "weak"}) == (32, 8)
    # parameters the workload rejects (8 does not split over 3 ranks; an unknown model): no split is invented
    assert batches(p | {"world_size": 3}) == (None, None) and batches(p | {"model": "nope"}) == (None, None)
    assert batches({"batch": 8}) == (None, None)
