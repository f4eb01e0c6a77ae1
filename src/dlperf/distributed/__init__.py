"""Work that spans processes: a case run as one `torchrun` job (torch.distributed), as its workload drives it.

`launch.py` starts the job (`python -m torch.distributed.run`, one node, a fixed number of processes: no
elasticity, no restarts) in its own session, waits for it under the case's time-out, and `outcome.py` classifies
how it ended (ok, error, timeout, oom, crashed, unsupported) from the ranks' own result files, their exit and the
cgroup's OOM-kill count. `rank.py` is what every rank runs: it joins the process group (gloo on CPUs, NCCL on
GPUs) and calls the rank function of the job's kind (`RANK_KINDS`): data-parallel training (`ddp_rank.py`,
driven by `ddp.py`) and collectives (`collectives_rank.py`, driven by `collectives.py`).

Layer 4, beside `workloads` and `serving`: the `ddp` and `collectives` workloads' `drive` calls it; it never
imports the runner, the report or the CLI.
"""
