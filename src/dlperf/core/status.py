"""The statuses a case result and a run may be stored with, and the groups the runner acts on."""

from __future__ import annotations

from typing import Any, Literal, get_args

#: How a case ended (results.status). docs/methodology.md's "What a case can end as" says what each means.
CaseStatus = Literal["ok", "error", "timeout", "oom", "crashed", "unsupported"]
#: Where a run stands (runs.status): `failed` is a `dlperf maxbatch` search stopped by a failure other
#: than running out of memory (its boundary is not known).
RunStatus = Literal["running", "complete", "interrupted", "failed"]

CASE_STATUSES: tuple[CaseStatus, ...] = get_args(CaseStatus)
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
#: Case statuses a retry (`--retry-failed`) runs again: every failure that running it again may change.
FAILED_STATUSES: tuple[CaseStatus, ...] = tuple(s for s in CASE_STATUSES if s not in ("ok", "unsupported"))


def check_run_status(status: str) -> RunStatus:
    """`status` if it is a RunStatus; ValueError otherwise (a programming error, never user input)."""
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r} (known: {', '.join(RUN_STATUSES)})")
    return status

#: Whether a case's figures can be trusted (metrics.validity), decided per case from its samples and from
#: what the machine was doing while it ran (`dlperf.core.validity`); the reason is stored beside it.
#: `valid`: nothing found against it. `noisy`: the samples are spread, bimodal or drifting.
#: `contended`: other work took the CPU (or the hypervisor stole it) while the case ran: the figure is
#: slower than the machine can do and is never called faster or slower by `compare`.
#: `invalid`: the measurement itself is broken (too few samples, timer overhead too large, impossible figures).
Validity = Literal["valid", "noisy", "contended", "invalid"]
VALIDITIES: tuple[Validity, ...] = get_args(Validity)

#: The label of a served case whose LoadGen run was shorter than MLPerf's rules (`metrics["loadgen"]["shortened"]`
#: non-empty), in every output that shows one: its verdict is LoadGen's under those settings, not an MLPerf result.
SHORTENED = "shortened: below MLPerf's rules"


class CaseEnded(Exception):
    """Raised by a workload that runs its case in processes of its own (a `torchrun` job: `dlperf.distributed`)
    to end the case with the status those processes ended with, which the worker cannot see from its own
    exception: `timeout`, `oom`, `crashed` or `error` of a child, with the reason and what was measured before."""

    def __init__(self, status: CaseStatus, reason: str, metrics: dict[str, Any] | None = None) -> None:
        if status not in CASE_STATUSES or status == "ok":
            raise ValueError(f"a case ends with a failure status, not {status!r}")
        super().__init__(reason)
        self.status: CaseStatus = status
        self.reason = reason
        self.metrics = metrics
