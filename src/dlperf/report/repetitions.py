"""The repetitions table: a case run in several worker processes (a study's `repetitions`), how its figure
moves from one process to the next. Used by the run table (`report.tables`: `show`, `report`, the HTML page).

A fleet run may run a case's repetitions on different machines: their difference is a machine's, not noise,
so where a run spans machines the processes are grouped per machine, with a machine column."""

from __future__ import annotations

import math
import statistics

from dlperf.core.result import CaseResult
from dlperf.runner.precision import precision_text
from dlperf.units import format_iqr, format_time

#: The column a run on several machines has (the run table's after `device`, this table's after `case`).
MACHINE_COLUMN = "machine"


def across_processes(results: list[CaseResult], names: dict[int, str] | None = None) -> list[list[str]]:
    """Per case run in several worker processes: the median of their medians, the spread within one process
    (median IQR/median) and across processes ((max - min) / median of the medians), and the precision the case
    reached (`runner.precision`: the 95% interval of its process medians, with the --precision target where one
    was set); [] when none repeats.
    `names`: the machine column of a run on several machines (`share_names`, by env id): the processes of a
    case are then grouped per machine, with the machine after the case (`across_columns`), so that two
    machines' difference is never shown as the spread across processes."""
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for r in results:
        if r.ok and r.m.median_s:
            groups.setdefault((r.case_key, names.get(r.env_id, "?") if names else ""), []).append(r)
    rows = []
    for (key, machine), group in groups.items():
        if len(group) < 2:
            continue
        medians = sorted(float(r.m.median_s) for r in group)  # type: ignore[arg-type]
        within = sorted(float(r.m.iqr_rel or 0.0) for r in group)
        mid = statistics.median(medians)
        across = (medians[-1] - medians[0]) / mid if mid > 0 else math.inf
        flags = sorted({r.m.validity for r in group if r.m.validity not in (None, "valid")})
        rows.append([key, *([machine] if names else []), str(len(group)), format_time(mid),
                     precision_text(group), format_iqr(statistics.median(within)), format_iqr(across),
                     ", ".join(flags) or "-"])
    return rows


ACROSS_COLUMNS = ("case", "processes", "median of medians", "precision (95% CI)", "spread within one (IQR)",
                  "spread across (max-min)", "flags")


def across_columns(names: dict[int, str] | None = None) -> tuple[str, ...]:
    """The repetitions table's columns: `ACROSS_COLUMNS`, with the machine after the case where `names` is set."""
    return (ACROSS_COLUMNS[0], MACHINE_COLUMN, *ACROSS_COLUMNS[1:]) if names else ACROSS_COLUMNS


__all__ = ["ACROSS_COLUMNS", "MACHINE_COLUMN", "across_columns", "across_processes"]
