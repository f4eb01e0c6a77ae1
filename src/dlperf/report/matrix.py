"""The machine matrix: one study across the machines of one store (the fleet case).

For each machine (`analysis.machines`: the hardware part of an environment) the newest *complete* run of
the study is taken; a run counts for every machine its results came from (a fleet run: each result row's
`env_id` is the machine that ran it), and a column holds only that machine's share of its run. Rows are
case keys, columns are machines (label, CPU model / GPUs / host hash, and the run id), a cell is the
case's median time per step in that run (its repetitions pooled, contended or invalid processes left out,
as in `analysis.history.pooled_point`) with its validity; a case a machine did not run, or that failed
there, shows as missing with its status. A note lists every machine's identity in full, so two machines
that look alike are never taken for one; machines with runs of the study but none complete are named with
their newest run's status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from dlperf.analysis.history import Point, pooled_point
from dlperf.analysis.machines import MachineShare, software, split_by_machine
from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.errors import DlperfError
from dlperf.hardware.identity import describe_machine
from dlperf.report.history_report import CellDoc, cell_doc
from dlperf.report.sections import Heading, Note, Section, Table
from dlperf.store.rows import RunRow


@dataclass(frozen=True)
class MachineColumn:
    """One machine and the run of it the matrix shows."""

    machine_id: str
    label: str
    identity: str
    run_id: str
    started_at: datetime
    software: dict[str, str]
    #: How many machines the run's results came from (> 1: a fleet run; the column is this machine's share).
    run_machines: int = 1


@dataclass(frozen=True)
class StudyMatrix:
    study: str
    columns: list[MachineColumn]
    case_keys: list[str]
    #: (case key, machine id) -> the case's point in that machine's run.
    cells: dict[tuple[str, str], Point]
    #: Machines with runs of the study but none complete: (machine id, label, newest run id, its status).
    incomplete: list[tuple[str, str, str, str]]


class ColumnDoc(TypedDict):
    """A `MachineColumn` as JSON (its fields in their order; the start as ISO 8601)."""

    machine_id: str
    label: str
    identity: str
    run_id: str
    started_at: str
    software: dict[str, str]
    run_machines: int


class MatrixCaseDoc(TypedDict):
    """A case's row: its point on each machine, by machine id."""

    case_key: str
    cells: dict[str, CellDoc]


class IncompleteDoc(TypedDict):
    machine_id: str
    label: str
    newest_run: str
    status: str


class MatrixDoc(TypedDict):
    """What `dlperf matrix --format json` writes (and its HTML page embeds)."""

    study: str
    machines: list[ColumnDoc]
    cases: list[MatrixCaseDoc]
    incomplete: list[IncompleteDoc]


def build_matrix(study: str, runs: Sequence[RunRow], envs: Mapping[str, Environment],
                 results: Mapping[str, Sequence[CaseResult]], result_envs: Mapping[int, Environment]
                 ) -> StudyMatrix:
    """The matrix of `study` from its runs (store rows), their environments (by run id), typed results (by run
    id) and every environment the results name (by env id: the machine that ran each). No run of the study, or
    no complete one on any machine: DlperfError (one line)."""
    if not runs:
        raise DlperfError(f"no runs of study {study!r} in this store (see 'dlperf runs')")
    newest_first = sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True)
    chosen: dict[str, tuple[RunRow, MachineShare, int]] = {}
    newest_any: dict[str, tuple[RunRow, MachineShare]] = {}
    for run in newest_first:
        shares = split_by_machine(results.get(run.id, []), result_envs, int(run.env_id), envs[run.id])
        for share in shares:
            newest_any.setdefault(share.machine_id, (run, share))
            if run.status == "complete":
                chosen.setdefault(share.machine_id, (run, share, len(shares)))
    incomplete = [(mid, share.label, r.id, str(r.status))
                  for mid, (r, share) in newest_any.items() if mid not in chosen]
    if not chosen:
        raise DlperfError(f"no complete run of study {study!r} on any machine in this store (newest: "
                          f"{newest_first[0].id}, {newest_first[0].status}); finish one with "
                          f"'dlperf run {study} --resume'")
    columns = [MachineColumn(mid, share.label, describe_machine(share.env), run.id, run.started_at,
                             software(share.env), n) for mid, (run, share, n) in chosen.items()]
    columns.sort(key=lambda c: (c.label, c.machine_id))
    grouped: dict[tuple[str, str], list[CaseResult]] = {}
    for mid, (_, share, _) in chosen.items():
        for r in share.results:
            grouped.setdefault((r.case_key, mid), []).append(r)
    keys = sorted({key for key, _ in grouped})
    cells = {(key, col.machine_id): pooled_point(0, grouped.get((key, col.machine_id), []))
             for key in keys for col in columns}
    return StudyMatrix(study, columns, keys, cells, incomplete)


def cell_text(p: Point) -> str:
    """A cell: the median with its 95% interval and its validity where it is not plainly valid, or
    'missing (STATUS)'."""
    if p.median_s is None:
        return f"missing ({p.status})"
    if not p.usable:  # every process of the case was contended or invalid: shown, marked, to be trusted less
        return f"{p.median_text()} ({p.validity})"
    return p.median_text() + (" (noisy)" if p.validity == "noisy" else "")


def column_name(col: MachineColumn) -> str:
    return f"{col.label} · {col.run_id}"


def matrix_sections(matrix: StudyMatrix) -> list[Section]:
    """The matrix as sections: a heading, the table, each machine's identity, machines left out."""
    n = len(matrix.columns)
    out: list[Section] = [
        Heading(f"# Machine matrix of study `{matrix.study}`",
                intro=f"The newest complete run of the study on each of {n} machine{'s' if n != 1 else ''}; "
                      "median time per step per case with its 95% interval (repetitions pooled; contended or "
                      "invalid processes left out where the case has others, marked where it has none)."),
        Table(f"{matrix.study}: median time per step [95% interval] on {n} machine{'s' if n != 1 else ''} "
              "(newest complete run of each)", ["case", *(column_name(c) for c in matrix.columns)],
              [[key, *(cell_text(matrix.cells[(key, c.machine_id)]) for c in matrix.columns)]
               for key in matrix.case_keys]),
        Heading("## Machines", intro="Each column's machine in full: two machines are never one column."),
    ]
    for c in matrix.columns:
        soft = ", ".join(f"{k} {v}" for k, v in c.software.items() if k not in ("cpu_flags",) and "." not in k)
        share = (f" (a fleet run on {c.run_machines} machines: this column holds the cases this machine ran)"
                 if c.run_machines > 1 else "")
        line = (f"machine {c.machine_id} ({c.label}): {c.identity}; run {c.run_id}{share} started "
                f"{c.started_at:%Y-%m-%d %H:%M} UTC; software: {soft}")
        out.append(Note(line, markdown=f"- {line}"))
    for mid, label, run_id, status in matrix.incomplete:
        line = f"machine {mid} ({label}): no complete run of {matrix.study} (newest: {run_id}, {status}); not shown"
        out.append(Note(line, markdown=f"- {line}"))
    return out


def matrix_json(matrix: StudyMatrix) -> MatrixDoc:
    """The matrix as plain JSON data."""
    return {
        "study": matrix.study,
        "machines": [{"machine_id": c.machine_id, "label": c.label, "identity": c.identity, "run_id": c.run_id,
                      "started_at": c.started_at.isoformat(), "software": dict(c.software),
                      "run_machines": c.run_machines} for c in matrix.columns],
        "cases": [{"case_key": key, "cells": {c.machine_id: cell_doc(matrix.cells[(key, c.machine_id)])
                                              for c in matrix.columns}}
                  for key in matrix.case_keys],
        "incomplete": [{"machine_id": m, "label": label, "newest_run": r, "status": s}
                       for m, label, r, s in matrix.incomplete],
    }


__all__ = ["MachineColumn", "StudyMatrix", "build_matrix", "cell_text", "matrix_json", "matrix_sections"]
