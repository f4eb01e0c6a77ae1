"""`RunOptions`: how a study is run (`dlperf run`, `serve`, `bench`), one checked object instead of a score of
click parameters passed one by one.

A RunOptions that exists is consistent: its cross-option checks (`--energy-estimate tdp` needs `--tdp-w`,
`--resume` or `--new`, `--steps` or `--budget`, ...) run when it is made, in the order `dlperf run` has always
made them, each a usage error with its own words. Light at import time (click only), as every command module is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import click

from dlperf.cli.fleet import check_executor
from dlperf.cli.options import refuse_steps_with_budget
from dlperf.errors import DlperfError
from dlperf.profiling.ncu import find_ncu


@dataclass(frozen=True)
class RunOptions:
    """The options that say how a study's cases run and where they are stored; the field names are the click
    parameters' (`grouped` fills one from them). Defaults are what leaving the option out means."""

    frameworks: tuple[str, ...] = ()  # only these frameworks of the study (none: all)
    devices: tuple[str, ...] = ()  # only these devices of the study (none: all)
    new: bool = False
    resume: str | None = None
    retry_failed: bool = False
    timeout_s: float | None = None
    mem_limit_mb: int | None = None
    threads: int | None = None
    wait_idle_s: float | None = None
    budget_s: float | None = None
    energy_estimate: str | None = None
    tdp_w: float | None = None
    counters: bool = False
    profile: bool | None = None
    steps: int | None = None
    executor: str = "local"
    scheduler: str | None = None
    precision_pct: float | None = None
    max_processes: int | None = None
    precision_budget_s: float | None = None
    max_cases: int | None = None
    db: str | None = None

    def __post_init__(self) -> None:
        """The checks that need no study and no store, in `dlperf run`'s order: the first one that fails speaks."""
        if self.counters and find_ncu() is None:
            raise DlperfError("--counters needs Nsight Compute: `ncu` is not on PATH nor in /usr/local/cuda/bin "
                              "(see `dlperf doctor`)")
        if self.energy_estimate == "tdp" and self.tdp_w is None:
            raise click.UsageError("--energy-estimate tdp needs --tdp-w WATTS (the CPU's thermal design power)")
        if self.tdp_w is not None and self.energy_estimate is None:
            raise click.UsageError("--tdp-w is only used with --energy-estimate tdp")
        check_resume_or_new(self.resume, self.new)
        check_executor(self.executor, self.scheduler)
        if self.retry_failed and self.new:
            raise click.UsageError("--retry-failed runs again the failed cases of an unfinished run and --new starts "
                                   "an empty one: give one of them")
        refuse_steps_with_budget(self.steps, self.budget_s)
        check_precision(self.precision_pct, self.max_processes, self.precision_budget_s, self.executor)
        if self.executor != "dask":  # a fleet's threads run on the workers' cores, not this machine's
            check_threads(self.threads)

    def overrides(self) -> dict[str, Any]:
        """The study settings these options replace (`RunSettings.with_overrides`: a None leaves the study's)."""
        return {"timeout_s": self.timeout_s, "mem_limit_mb": self.mem_limit_mb, "threads": self.threads,
                "budget_s": self.budget_s, "energy_estimate_tdp_w": self.tdp_w, "profile": self.profile,
                "steps": self.steps,
                "precision_rel": None if self.precision_pct is None else self.precision_pct / 100,
                "max_processes": self.max_processes, "precision_budget_s": self.precision_budget_s}


def check_resume_or_new(resume: str | None, new: bool) -> None:
    """--resume and --new together is a usage error (one continues a run, the other starts one)."""
    if resume and new:
        raise click.UsageError("--resume RUN continues a run and --new starts another: give one of them")


def check_precision(precision_pct: float | None, max_processes: int | None, budget_s: float | None,
                    executor: str) -> None:
    """--max-processes and --precision-budget only with --precision; --precision only for a local run (a fleet's
    processes run on several machines, whose spread is not one case's precision)."""
    if precision_pct is None and (max_processes is not None or budget_s is not None):
        raise click.UsageError("--max-processes and --precision-budget bound --precision: give --precision PCT too")
    if precision_pct is not None and executor == "dask":
        raise click.UsageError("--precision runs more processes here, between cases: it is not available with "
                               "--executor dask")


def check_threads(threads: int | None) -> None:
    """--threads beyond the logical cores is a usage error (more threads than cores only wait on each other)."""
    logical = os.cpu_count() or 1
    if threads is not None and threads > logical:
        raise click.UsageError(f"--threads {threads}: this machine has {logical} logical cores; more threads than "
                               f"cores only wait on each other")
