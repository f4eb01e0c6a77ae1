"""`RunOptions` checks itself when it is made: each cross-option conflict is one usage error with the words
`dlperf run` has always used, the first one in run's order speaks, and what passes becomes the study's overrides.
`grouped` fills such dataclasses from a command's click parameters. No store, no worker: all in this process."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import click
import pytest

from dlperf.cli import run_options
from dlperf.cli.options import grouped
from dlperf.cli.run_options import RunOptions
from dlperf.errors import DlperfError

#: Each conflict, and the exact message `dlperf run` prints for it (tests/cli/test_bad_inputs.py checks the same
#: words through the command).
CONFLICTS: list[tuple[dict[str, Any], str]] = [
    ({"energy_estimate": "tdp"},
     "--energy-estimate tdp needs --tdp-w WATTS (the CPU's thermal design power)"),
    ({"tdp_w": 200.0}, "--tdp-w is only used with --energy-estimate tdp"),
    ({"resume": "abc", "new": True}, "--resume RUN continues a run and --new starts another: give one of them"),
    ({"scheduler": "tcp://h:8786"}, "--scheduler ADDR is for --executor dask (cases run here with --executor local)"),
    ({"executor": "dask"}, "--executor dask needs --scheduler tcp://HOST:PORT (see 'dlperf fleet --help')"),
    ({"retry_failed": True, "new": True},
     "--retry-failed runs again the failed cases of an unfinished run and --new starts an empty one: give one of "
     "them"),
    ({"steps": 10, "budget_s": 1.0},
     "--steps times a fixed number of calls and --budget bounds the adaptive stop, which --steps replaces: give "
     "one of them"),
    ({"max_processes": 4}, "--max-processes and --precision-budget bound --precision: give --precision PCT too"),
    ({"precision_budget_s": 30.0},
     "--max-processes and --precision-budget bound --precision: give --precision PCT too"),
    ({"precision_pct": 5.0, "executor": "dask", "scheduler": "tcp://h:8786"},
     "--precision runs more processes here, between cases: it is not available with --executor dask"),
]


@pytest.mark.parametrize(("given", "message"), CONFLICTS, ids=lambda v: str(v)[:40])
def test_each_conflict_is_a_usage_error_in_runs_words(given: dict[str, Any], message: str) -> None:
    with pytest.raises(click.UsageError) as err:
        RunOptions(**given)
    assert err.value.format_message() == message


def test_the_first_conflict_in_runs_order_speaks() -> None:
    """Several conflicts at once: the one `dlperf run` checked first is the one reported (energy before resume,
    resume before the executor, --new/--retry-failed before --steps/--budget)."""
    with pytest.raises(click.UsageError, match="--energy-estimate tdp needs"):
        RunOptions(energy_estimate="tdp", resume="r", new=True, steps=1, budget_s=1.0)
    with pytest.raises(click.UsageError, match="--resume RUN continues"):
        RunOptions(resume="r", new=True, executor="dask")
    with pytest.raises(click.UsageError, match="--retry-failed runs again"):
        RunOptions(retry_failed=True, new=True, steps=1, budget_s=1.0)


def test_threads_past_the_logical_cores_is_refused_here_but_not_for_a_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_options.os, "cpu_count", lambda: 4)
    with pytest.raises(click.UsageError) as err:
        RunOptions(threads=5)
    assert err.value.format_message() == ("--threads 5: this machine has 4 logical cores; more threads than cores "
                                          "only wait on each other")
    assert RunOptions(threads=4).threads == 4
    fleet = RunOptions(threads=64, executor="dask", scheduler="tcp://h:8786")  # the workers' cores, not these
    assert fleet.threads == 64


def test_counters_need_ncu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_options, "find_ncu", lambda: None)
    with pytest.raises(DlperfError, match="--counters needs Nsight Compute: `ncu` is not on PATH"):
        RunOptions(counters=True, energy_estimate="tdp")  # checked before any usage error, as run did
    monkeypatch.setattr(run_options, "find_ncu", lambda: "/opt/ncu")
    assert RunOptions(counters=True).counters


def test_the_overrides_are_the_study_settings_replaced() -> None:
    opts = RunOptions(timeout_s=30.0, mem_limit_mb=2048, threads=1, energy_estimate="tdp", tdp_w=120.0, profile=True,
                      steps=5, precision_pct=5.0, max_processes=4, precision_budget_s=60.0)
    assert opts.overrides() == {"timeout_s": 30.0, "mem_limit_mb": 2048, "threads": 1, "budget_s": None,
                                "energy_estimate_tdp_w": 120.0, "profile": True, "steps": 5, "precision_rel": 0.05,
                                "max_processes": 4, "precision_budget_s": 60.0}
    assert set(RunOptions().overrides().values()) == {None}  # nothing given: the study's settings as they are


def test_run_options_are_frozen() -> None:
    opts = RunOptions()
    with pytest.raises(FrozenInstanceError):
        opts.new = True  # type: ignore[misc]


@dataclass(frozen=True)
class _Where:
    device: str = "cpu"
    frameworks: tuple[str, ...] = ()


def test_grouped_gathers_parameters_into_dataclasses_in_order() -> None:
    """A name goes to the first group that has it; the rest stay arguments; a group's checks run before the body."""
    seen: dict[str, Any] = {}

    @grouped(where=_Where, options=RunOptions)
    def command(study: str, where: _Where, options: RunOptions) -> None:
        seen.update(study=study, where=where, options=options)

    command(study="smoke", device="cuda", frameworks=("torch",), new=True, threads=1)
    assert seen == {"study": "smoke", "where": _Where(device="cuda", frameworks=("torch",)),
                    "options": RunOptions(new=True, threads=1)}
    assert command.__name__ == "command"  # click names the command after it
    seen.clear()
    with pytest.raises(click.UsageError, match="--resume RUN continues"):
        command(study="smoke", resume="r", new=True)
    assert seen == {}
