"""The run table's columns and their headers (`report.tables` draws the table): which columns, with the machine
column where a run spans machines, and the GB/s header that is nccl-tests' algbw for collectives."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len

from dlperf.core.result import CaseResult
from dlperf.report.repetitions import MACHINE_COLUMN

COLUMNS = ("framework", "device", "params", "status", "validity", "median", "IQR", "n", "samples/s", "GFLOP/s", "GB/s",
           "first call", "energy/call", "note")


#: Workloads whose bytes per second (the GB/s column: bytes / median time) is nccl-tests' algorithm bandwidth,
#: algbw, and not the bus bandwidth (busbw) their own table shows beside it: for all-gather and reduce-scatter the
#: two differ by 2x on two ranks, so the column is headed (or, in a table of several workloads, each cell marked)
#: algbw there.
ALGBW_WORKLOADS = ("collectives",)
ALGBW_TITLE = "algbw GB/s"


def all_algbw(results: Sequence[CaseResult]) -> bool:
    return bool(results) and all(r.workload in ALGBW_WORKLOADS for r in results)


def column_titles(cols: Sequence[str], results: Sequence[CaseResult]) -> list[str]:
    """The headers of `cols` over these results: `GB/s` is `algbw GB/s` where every case is a collective."""
    return [ALGBW_TITLE if c == "GB/s" and all_algbw(results) else c for c in cols]


def header_len(col: str, algbw: bool) -> int:
    """The width of `col`'s header: `column_titles`' (`algbw`: every case a collective)."""
    return cell_len(ALGBW_TITLE if algbw and col == "GB/s" else col)


def columns(names: dict[int, str]) -> tuple[str, ...]:
    """The table's columns: `COLUMNS`, with the machine column where the run spans machines (`names` not empty)."""
    if not names:
        return COLUMNS
    i = COLUMNS.index("device") + 1
    return (*COLUMNS[:i], MACHINE_COLUMN, *COLUMNS[i:])
