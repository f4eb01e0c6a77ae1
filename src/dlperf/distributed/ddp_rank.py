"""One rank of a `ddp` job: the study-001 CNN or the transformer trained with DistributedDataParallel.

The payload (`dlperf.distributed.ddp.rank_payload`) carries plain values: the workload and model, the inner
training step's parameters with every default resolved (`train`), the batch of this rank, DDP's bucket size, the
run's timing settings (warmup, steps, budget_s, min_run_time_s), profile_steps and the seed. The model comes from
`dlperf.models` (never from `dlperf.workloads`): the CNN as `models.torch_models` builds it, trained by SGD with
momentum on softmax cross-entropy (as the `cnn` workload's training step); the transformer as
`models.transformer.torch_model` builds it, trained by AdamW, next-token loss for a decoder, classification for
an encoder (as the `transformer` workload's). Every rank starts from the same weights (seeded; DDP broadcasts rank
0's at construction anyway) and trains on its own shard of synthetic data (`shard`, seeded by the rank).

Timing: the first step alone, `warmup` steps, then rank 0 decides the number of timed steps (`plan_steps`) and
broadcasts it, so every rank runs exactly as many (a rank that ran one more would wait forever in its
all-reduce). The timed steps start together after a barrier; every rank records when it left the barrier
(`loop_start_s`) and when each of its steps ended (`step_end_s`, perf_counter, the device synchronised on CUDA):
perf_counter is CLOCK_MONOTONIC on Linux, one clock for every process of the node, so the driver can set the
ranks' readings against each other and take each step as the slowest rank finished it. Each rank also keeps its
own step durations (`step_s`) and its process's CPU time per step (`cpu_s`). Then `profile_steps` more steps run
under torch.profiler (`ddp_profile`) for the time in communication. Python's garbage collector is off during the
timed and the profiled steps (`rank.gc_paused`), as under the house's timer.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from dlperf.distributed.records import DdpPayload, DdpRankFigures, EquivalenceFigures

#: The fewest timed steps (the timer's own minimum number of samples, `timing.timer.measure`).
MIN_STEPS = 6
#: The most timed steps (the timer's `max_samples`).
MAX_STEPS = 1000
#: Steps of the test-only equivalence check (`check: equivalence`).
CHECK_STEPS = 2


def shard_seed(seed: int, rank: int) -> int:
    """The seed of rank `rank`'s synthetic data: each rank its own shard, reproducible."""
    return 1000 * seed + rank


def build_model(torch: Any, p: DdpPayload, device: str) -> Any:
    """The model of the payload on `device`, in training mode, the same weights for a given seed on every rank."""
    train = p["train"]
    if p["workload"] == "cnn":
        from dlperf.models import get_spec, torch_models

        torch.manual_seed(p["seed"])
        net = torch_models.build(get_spec(train["model"], train["num_classes"]), train["image_size"])
    else:
        from dlperf.models.transformer import init_weights
        from dlperf.models.transformer import torch_model as tm

        cfg = _config(train)
        net = tm.build(cfg, init_weights(cfg, p["seed"]))
    return net.to(device).train()


def _config(train: dict[str, Any]) -> Any:
    from dlperf.models.transformer import get_config

    return get_config(train["model"], **{k: train[k] for k in ("n_layer", "d_model", "n_head", "vocab_size",
                                                                "max_positions")})


def shard(torch: Any, p: DdpPayload, rank: int, batch: int, device: str) -> tuple[Any, Any]:
    """(inputs, targets) of rank `rank`: `batch` samples drawn from the rank's own seed (`shard_seed`)."""
    train, seed = p["train"], shard_seed(p["seed"], rank)
    if p["workload"] == "cnn":
        from dlperf.models import get_spec

        spec = get_spec(train["model"], train["num_classes"])
        size = train["image_size"] or spec.image_size
        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn(batch, spec.in_channels, size, size, generator=gen)
        y = torch.randint(0, spec.num_classes, (batch,), generator=gen)
        return x.to(device), y.to(device)
    from dlperf.models.transformer import make_labels, make_tokens

    cfg = _config(train)
    if cfg.kind == "decoder":  # next-token prediction: inputs the first seq_len tokens, targets the last seq_len
        toks = torch.as_tensor(make_tokens(cfg, batch, train["seq_len"] + 1, seed=seed))
        return toks[:, :-1].contiguous().to(device), toks[:, 1:].reshape(-1).contiguous().to(device)
    x = torch.as_tensor(make_tokens(cfg, batch, train["seq_len"], seed=seed))
    return x.to(device), torch.as_tensor(make_labels(cfg, batch, seed=seed + 1)).to(device)


def optimizer(torch: Any, p: DdpPayload, params: Any) -> Any:
    """The inner workload's optimizer: SGD with momentum (cnn), AdamW (transformer; fused as its builder)."""
    train = p["train"]
    if p["workload"] == "cnn":
        return torch.optim.SGD(params, lr=train["lr"], momentum=train["momentum"])
    return torch.optim.AdamW(params, lr=train["lr"], weight_decay=train["weight_decay"], fused=True)


def make_step(torch: Any, net: Any, opt: Any, x: Any, y: Any) -> Callable[[], Any]:
    """One optimizer step: forward, mean cross-entropy (over images, or over every token), backward (DDP's
    all-reduce of the gradients during it, when `net` is DDP-wrapped), update."""
    cross_entropy = torch.nn.functional.cross_entropy

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        out = net(x)
        loss = cross_entropy(out.reshape(-1, out.shape[-1]), y)
        loss.backward()
        opt.step()
        return loss

    return step


def plan_steps(p: DdpPayload, step_s: float) -> tuple[int, str]:
    """(timed steps, why) from one step's estimated time and the run's settings: `steps` where the study fixes
    it; otherwise as many steps as fill the timer's budget (`budget_s`), at least enough for `min_run_time_s` and
    MIN_STEPS, at most MAX_STEPS. The timer's adaptive stop (a CI narrow enough) would need every rank's time
    after each step, one more collective per step; a plan made before timing needs one broadcast in all."""
    fixed = p.get("steps")
    if fixed:
        return int(fixed), f"steps: {fixed} (fixed by the study)"
    est = max(step_s, 1e-9)
    floor_n = max(MIN_STEPS, math.ceil(p["min_run_time_s"] / est))
    n = min(MAX_STEPS, max(floor_n, math.floor(p["budget_s"] / est)))
    return n, (f"{n} steps planned on rank 0 from the warm-up's {est * 1e3:.3g} ms per step: the budget of "
               f"{p['budget_s']:g} s (at least {MIN_STEPS} steps and min_run_time_s, at most {MAX_STEPS})")


def run(spec: Any, *, rank: int, world_size: int, device: str) -> DdpRankFigures | EquivalenceFigures:
    """Train under DDP, time the steps, profile a few; this rank's figures (the driver combines the ranks')."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    p: DdpPayload = spec.payload
    if p["train"].get("precision", "fp32") != "fp32":
        from dlperf.frameworks import UnsupportedError

        raise UnsupportedError("ddp trains in float32 only")
    cuda = device.startswith("cuda")
    if cuda and p["workload"] == "transformer":
        torch.backends.cuda.matmul.fp32_precision = "ieee"  # float32 as the transformer workload's fp32 (no TF32)
    net = build_model(torch, p, device)
    ddp = DistributedDataParallel(net, device_ids=[device] if cuda else None, bucket_cap_mb=p["bucket_cap_mb"])
    opt = optimizer(torch, p, ddp.parameters())
    x, y = shard(torch, p, rank, p["batch_per_rank"], device)
    step = make_step(torch, ddp, opt, x, y)
    if p.get("check") == "equivalence":  # TEST ONLY (tests/distributed/test_ddp.py)
        return _check_equivalence(torch, p, ddp, step, world_size, device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def timed() -> tuple[float, float, float]:
        """(wall s, this process's CPU s, end on perf_counter's clock) of one step."""
        sync()
        c0, t0 = time.process_time(), time.perf_counter()
        step()
        sync()
        t1, c1 = time.perf_counter(), time.process_time()
        return t1 - t0, c1 - c0, t1

    first_s = timed()[0]
    warm = [timed()[0] for _ in range(int(p["warmup"]))]
    plan = torch.zeros(1, dtype=torch.int64, device=device)
    why = ""
    if rank == 0:
        n, why = plan_steps(p, statistics.median(warm) if warm else first_s)
        plan[0] = n
    dist.broadcast(plan, src=0)
    n = int(plan[0])
    walls, cpus, ends = [], [], []
    from dlperf.distributed.ddp_profile import profile_comm
    from dlperf.distributed.rank import gc_paused

    with gc_paused():  # no collection inside a timed or profiled step (as the house's timer)
        dist.barrier()  # the timed steps start together: the job's step 0 runs from here
        sync()
        loop_start_s = time.perf_counter()
        for _ in range(n):
            wall, cpu, end = timed()
            walls.append(wall)
            cpus.append(cpu)
            ends.append(end)
        dist.barrier()  # the profiled steps start together too
        comm = profile_comm(torch, lambda: timed()[::2], int(p["profile_steps"]), spec.backend, world_size, cuda)
    return {"device": device, "first_call_s": first_s, "warmup_step_s": warm, "steps_timed": n,
            "stop_reason": why, "step_s": walls, "cpu_s": cpus, "loop_start_s": loop_start_s, "step_end_s": ends,
            "comm": comm}


def _check_equivalence(torch: Any, p: DdpPayload, ddp: Any, step: Callable[[], Any], world_size: int,
                       device: str) -> EquivalenceFigures:
    """TEST ONLY: after CHECK_STEPS DDP steps on this rank's shard, the largest difference between the DDP
    model's weights and those of one plain model trained in this process on the whole global batch (every rank's
    shard, concatenated) from the same initial weights. DDP averages the ranks' gradients; with each rank's mean
    loss over equal shards that average is the full batch's gradient, so the two must agree to float rounding."""
    for _ in range(CHECK_STEPS):
        step()
    ref = build_model(torch, p, device)
    shards = [shard(torch, p, r, p["batch_per_rank"], device) for r in range(world_size)]
    rank = torch.distributed.get_rank()
    x = torch.cat([s[0] for s in shards])
    y = torch.cat([s[1] for s in shards])
    ref_step = make_step(torch, ref, optimizer(torch, p, ref.parameters()), x, y)
    for _ in range(CHECK_STEPS):
        ref_step()
    # Controls, so that a zero difference means something: how far training moved the weights at all, and how
    # far one process trained on this rank's shard alone lands from the full-batch reference.
    own = build_model(torch, p, device)
    own_step = make_step(torch, own, optimizer(torch, p, own.parameters()), *shards[rank])
    for _ in range(CHECK_STEPS):
        own_step()
    start = build_model(torch, p, device)
    return {"check": {"steps": CHECK_STEPS, "global_batch": int(x.shape[0]),
                      "params": len(list(ref.parameters())),
                      "max_abs_diff": _max_diff(ddp.module, ref),       # DDP on shards vs one process, full batch
                      "max_abs_update": _max_diff(start, ref),          # the reference's own change
                      "max_abs_diff_own_shard": _max_diff(own, ref)}}   # one shard alone vs the full batch


def _max_diff(a: Any, b: Any) -> float:
    """The largest absolute difference between two models' parameters (same architecture)."""
    return max(float((u.detach() - v.detach()).abs().max())
               for u, v in zip(a.parameters(), b.parameters(), strict=True))
