"""The run table: one row per case of a run, for the terminal (rich) or as Markdown, with the environment.

Study reports add their own sections after it (`report.registry`); this table is what `show` prints. Where
a run's results came from more than one machine (a fleet run), a `machine` column names the machine of each
row and the machines are listed under the environment; a run on one machine has neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dlperf.analysis.machines import MachineShare, share_names
from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult, Metrics
from dlperf.core.status import SHORTENED
from dlperf.core.validity import short_reason
from dlperf.report.noise import noise_lines
from dlperf.report.repetitions import MACHINE_COLUMN, across_columns, across_processes
from dlperf.report.run_columns import ALGBW_WORKLOADS, COLUMNS, all_algbw, column_titles, columns, header_len
from dlperf.store.rows import RunRow
from dlperf.units import MISSING, format_gib, format_iqr, format_joules, format_rate, format_time
from dlperf.untrusted import printable

#: The note column is never narrower than this; a note longer than NOTE_CELL_CHARS is cut in the table, with
#: a [n] that points to it whole under the table (a reason of hundreds of characters must not fold the
#: table into hundreds of lines).
NOTE_MIN_WIDTH = 24
NOTE_CELL_CHARS = 64
#: The narrowest the params and note columns may fold to before the run table is made compact (`_compact`).
FOLD_MIN_WIDTH = 24
#: The option of `dlperf show` that prints failed cases whole, with their stored tracebacks.
ERRORS_HINT = "dlperf show {run} --errors"

def energy_text(m: Metrics) -> str:
    """Measured joules per call; an estimate only when one was asked for, and marked as such."""
    e = m.energy or {}
    if e.get("measured"):
        return format_joules(e["energy_per_call_j"])
    est = m.energy_estimate or {}
    if "energy_per_call_j" in est:
        return format_joules(est["energy_per_call_j"], estimate=True)
    return MISSING


def energy_reasons(results: list[CaseResult]) -> list[str]:
    """The distinct reasons energy was not measured, for one line under a table."""
    seen: list[str] = []
    for r in results:
        e = r.m.energy or {}
        if r.ok and not e.get("measured") and e.get("reason") and e["reason"] not in seen:
            seen.append(e["reason"])
    return seen


def params_text(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def loadgen_verdict(m: Metrics) -> str | None:
    """A served case's LoadGen verdict (VALID / INVALID), None for any other case."""
    lg = m.loadgen_summary()
    if lg is not None:
        return lg.validity or "unknown"
    return "no LoadGen run" if m.get("server_search") is not None else None


def validity_cell(m: Metrics) -> str:
    """dlperf's validity (the machine's trust), and for a served case LoadGen's verdict on the run beside it."""
    verdict = loadgen_verdict(m)
    own = m.validity or "unknown"
    lg = m.loadgen_summary()
    short = ", shortened" if lg is not None and lg.shortened else ""
    return own if verdict is None else f"{own}, LoadGen {verdict}{short}"


def n_cell(m: Metrics) -> str:
    """Samples x calls per sample; a driven (served) case has no timer samples: its LoadGen query count."""
    if m.n_samples is not None:
        return f"{m.n_samples}x{m.block_size}"
    lg = m.loadgen_summary()
    count = lg.results.get("result_query_count") if lg is not None else None
    return f"{count} queries" if isinstance(count, int) else "-"


def result_rows(results: list[CaseResult], names: dict[int, str] | None = None) -> list[dict[str, str]]:
    """Display strings for each result; every time shown carries its IQR and sample count; with `names` (env
    id -> machine, `analysis.machines.share_names`), the machine that ran it."""
    rows = []
    mark_algbw = not all_algbw(results)  # a table of several workloads marks each collective's cell instead
    for r in results:
        m = r.m
        rep = f" #{r.repetition}" if r.repetition else ""
        rate = format_rate(m.bytes_per_s, 1e9) if r.ok else "-"
        if r.ok and mark_algbw and r.workload in ALGBW_WORKLOADS and rate != MISSING:
            rate += " algbw"
        ok = r.ok
        note = r.reason or ""
        if ok and m.validity not in (None, "valid"):
            note = short_reason(m.validity_reason)
        elif ok and m.noisy:
            note = "noisy"  # IQR/median > 10%: the IQR column has the figure
        rows.append({
            "framework": r.framework,
            "device": r.device,
            MACHINE_COLUMN: (names or {}).get(r.env_id, "?"),
            "params": params_text(r.params) + rep,
            "status": r.status,
            "validity": validity_cell(m) if ok else "-",
            "median": format_time(m.median_s) if ok else "-",
            "IQR": format_iqr(m.iqr_rel) if ok else MISSING,
            "n": n_cell(m) if ok else "-",
            "samples/s": format_rate(m.samples_per_s) if ok else "-",
            "GFLOP/s": format_rate(m.flops_per_s, 1e9) if ok else "-",
            "GB/s": rate,
            "first call": format_time(m.first_call_s) if ok else "-",
            "energy/call": energy_text(m) if ok else "-",
            "note": note,
        })
    return rows


def validity_line(results: list[CaseResult]) -> str:
    """How many measured cases are valid, noisy, contended or invalid, and what that means."""
    counts: dict[str, int] = {}
    for r in results:
        if r.ok:
            key = r.m.validity or "unknown"
            counts[key] = counts.get(key, 0) + 1
    text = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no measured case"
    line = (f"validity: {text} (contended: other work took the CPU while it ran, so the figure is slower than "
            f"this machine; unknown: measured before dlperf recorded it)")
    verdicts: dict[str, int] = {}
    for r in results:
        verdict = loadgen_verdict(r.m) if r.ok else None
        if verdict is not None:
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
    if verdicts:
        line += ("; served cases, LoadGen's verdict on the run: " + ", ".join(f"{n} {k}" for k, n in verdicts.items())
                 + " (an INVALID run has no samples/s)")
    short = sum(1 for r in results if r.ok and (lg := r.m.loadgen_summary()) is not None and lg.shortened)
    if short:
        line += (f"; {short} served case(s) {SHORTENED} (shortened in the validity column: LoadGen judged them "
                 "against shorter durations or fewer queries than MLPerf's, so they are not MLPerf results)")
    return line


def environment_lines(env: Environment) -> list[str]:
    fws = env.get("frameworks") or {}
    fw_text = ", ".join(
        f"{name} {info.get('version') or 'missing'}"
        + (f" ({info['blas']})" if info.get("blas") else "")
        + (f" (BLAS {info['blas_info']}, oneDNN {info.get('onednn', '?')})" if info.get("blas_info") else "")
        for name, info in sorted(fws.items())
    )
    gpus = env.get("gpus") or []
    gpu_text = ", ".join(g["name"] for g in gpus) if gpus else f"none ({env.get('gpu_source', 'not probed')})"
    ram = env.get("ram_bytes")
    return [
        f"CPU: {env.get('cpu_model')} ({env.get('cpu_physical_cores')} physical / "
        f"{env.get('cpu_logical_cores')} logical cores; {env.get('threads')} threads used)",
        f"RAM: {format_gib(ram)}" if ram else "RAM: unknown",
        f"GPU: {gpu_text}",
        f"OS: {env.get('os')} (kernel {env.get('kernel')}), Python {env.get('python')}",
        f"frameworks: {fw_text or 'none'}",
        f"dlperf {env.get('dlperf_version')} (commit {env.get('dlperf_git_commit') or 'unknown'})",
    ]


def cut_notes(rows: list[dict[str, str]], limit: int = NOTE_CELL_CHARS) -> list[str]:
    """Cut each note longer than `limit` in place, ending it with `[n]`; return the whole notes, n = 1, 2, ...
    (the same note twice gets one number)."""
    whole: list[str] = []
    for row in rows:
        note = row["note"]
        if len(note) > limit:
            if note not in whole:
                whole.append(note)
            mark = f"... [{whole.index(note) + 1}]"
            row["note"] = note[: limit - len(mark)].rstrip() + mark
    return whole


def machine_lines(shares: Sequence[MachineShare] | None) -> list[str]:
    """For a run on several machines: each machine its results came from, in full; [] for one machine."""
    names = share_names(shares or [])
    if not shares or not names:
        return []
    return [f"machines: the results came from {len(shares)} (the environment above is the run's own)"] + [
        f"machine {names[s.env_ids[0]]}: {s.describe()}" for s in shares]


def shared_params(results: list[CaseResult]) -> dict[str, Any]:
    """The parameters every case of `results` has with the same value ({} for fewer than two cases)."""
    if len(results) < 2:
        return {}
    first = results[0].params or {}
    return {k: v for k, v in first.items() if all((r.params or {}).get(k, _ABSENT) == v for r in results[1:])}


_ABSENT = object()


def _fits(rows: list[dict[str, str]], cols: tuple[str, ...], console_width: int, algbw: bool = False) -> bool:
    """Whether the table fits the console with its folding columns (params, note) at a readable width: every
    other column at its widest cell, params and note each at least FOLD_MIN_WIDTH (or their widest cell), 3
    characters of border per column."""
    def widest(c: str) -> int:
        return max([header_len(c, algbw), *(cell_len(r[c]) for r in rows)])

    need = sum((min(widest(c), FOLD_MIN_WIDTH) if c in ("params", "note") else widest(c)) + 3 for c in cols)
    return need + 1 <= console_width


def _compact(results: list[CaseResult], rows: list[dict[str, str]], cols: tuple[str, ...], console_width: int,
             notes: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """A table wider than the console made to fit, rows rewritten in place: what every case shares (a column
    with one value, the parameters with one value) leaves the table for one line under it, columns with no
    value in any case are left out (named), and the notes become numbered marks whose text follows the table
    (`notes` is extended). Returns (the columns kept, the lines to print under the table); a table that fits
    is left as it is."""
    if len(rows) < 2 or _fits(rows, cols, console_width, all_algbw(results)):
        return cols, []
    same = [c for c in cols if c in SHAREABLE_COLUMNS and len({r[c] for r in rows}) == 1]
    shared = shared_params(results)
    for row, r in zip(rows, results, strict=True):
        rep = f" #{r.repetition}" if r.repetition else ""
        row["params"] = (params_text({k: v for k, v in (r.params or {}).items() if k not in shared}) or "-") + rep
    empty = [c for c in cols if c not in KEPT_COLUMNS and c not in same
             and all(r[c] in ("-", MISSING, "") for r in rows)]
    for row in rows:
        note = row["note"]
        if note and not note.endswith("]"):
            if note not in notes:
                notes.append(note)
            row["note"] = f"[{notes.index(note) + 1}]"
    lines = [f"every case: {', '.join(f'{c} {rows[0][c]}' for c in same)}"
             + (f"; {params_text(shared)}" if shared else "")] if same or shared else []
    if empty:
        lines.append(f"no value in any case, so not shown: {', '.join(empty)}")
    return tuple(c for c in cols if c not in same and c not in empty), lines


#: Columns the run table never leaves out, even where every cell is empty; SHAREABLE_COLUMNS leave it for the
#: "every case" line where a table too wide for the console has one value in them.
KEPT_COLUMNS = ("params", "median", "note")
SHAREABLE_COLUMNS = ("framework", "device", MACHINE_COLUMN, "status", "validity")


def _note_width(rows: list[dict[str, str]], console_width: int, cols: tuple[str, ...] = COLUMNS,
                algbw: bool = False) -> int:
    """The note column's width: what the other columns leave of the console (their widest cell or header,
    plus 3 characters of border each), at least NOTE_MIN_WIDTH (the params column folds to make room), at
    most the longest note."""
    others = sum(max([header_len(c, algbw), *(cell_len(r[c]) for r in rows)]) + 3 for c in cols if c != "note")
    longest = max([cell_len("note"), *(cell_len(r["note"]) for r in rows)])
    return min(longest, max(NOTE_MIN_WIDTH, console_width - others - 4))


def render_terminal(run: RunRow, env: Environment, results: list[CaseResult],
                    console: Console, machines: Sequence[MachineShare] | None = None) -> None:
    """The run table, its notes and the environment; `machines`: the run's shares by machine (a machine
    column where there is more than one)."""
    table = Table(title=shown(f"run {run.id} - study {run.study} ({run.variant}), {run.status}"),
                  title_justify="left")
    names = share_names(machines or [])
    cols = columns(names)
    rows = result_rows(results, names)
    whole_notes = cut_notes(rows)
    cols, under = _compact(results, rows, cols, console.width, whole_notes)
    note_width = _note_width(rows, console.width, cols, all_algbw(results))
    for col, title in zip(cols, column_titles(cols, results), strict=True):
        table.add_column(title, justify="right" if col in ("median", "IQR", "n", "samples/s", "GFLOP/s", "GB/s",
                                                          "first call", "energy/call") else "left",
                         overflow="fold", no_wrap=col not in ("params", "note"),
                         width=note_width if col == "note" else None)

    for row in rows:
        style = None if row["status"] == "ok" else ("yellow" if row["status"] == "unsupported" else "red")
        table.add_row(*(shown(row[c]) for c in cols), style=style)
    console.print(table)
    for line in under:
        console.print(shown(line), highlight=False, soft_wrap=True)
    for i, note in enumerate(whole_notes, 1):
        console.print(shown(f"[{i}] {note}"), highlight=False, soft_wrap=True)
    failed = sum(r.status in FAILED for r in results)
    if failed:
        console.print(shown(f"{failed} failed case{'s' * (failed != 1)}: each one's whole reason and stored "
                             f"traceback: {ERRORS_HINT.format(run=run.id)}"), highlight=False, soft_wrap=True)
    console.print(f"{stored_text(run, results)}; times are per call (median, IQR/median, "
                  f"samples x calls per sample)", highlight=False)
    console.print(shown(validity_line(results)), highlight=False)
    for line in noise_lines(results):
        console.print(shown(line), highlight=False, soft_wrap=True)
    across = across_processes(results, names)
    if across:
        rep_table = Table(title="repetitions in separate worker processes", title_justify="left")
        for col in across_columns(names):
            rep_table.add_column(col, justify="left" if col in ("case", MACHINE_COLUMN, "flags") else "right",
                                 overflow="fold")
        for row in across:
            rep_table.add_row(*(shown(x) for x in row))
        console.print(rep_table)
    for reason in energy_reasons(results):
        console.print(shown(f"energy: {reason}"), highlight=False)
    if any(r.m.energy_estimate is not None for r in results):
        console.print("energy marked 'est.' is an ESTIMATE (TDP x CPU utilisation x time), not a measurement",
                      highlight=False)
    for line in environment_lines(env) + machine_lines(machines):
        console.print(shown(f"  {line}"), highlight=False)


def shown(text: str) -> str:
    """Text from the store as data on a terminal: control characters spelled out, rich's markup escaped (a run
    id or a case key may come from a bundle another machine wrote)."""
    return escape(printable(text))


FAILED = ("error", "timeout", "oom", "crashed")


def stored_text(run: RunRow, results: list[CaseResult]) -> str:
    """'12 of 12 cases stored', and the processes --precision added beyond the planned ones where it did."""
    added = sum(1 for r in results if (r.m.get("precision") or {}).get("added"))
    text = f"{len(results) - added} of {run.n_cases} cases stored"
    return text + (f" (and {added} processes added to reach --precision)" if added else "")


def case_details(results: list[CaseResult]) -> list[str]:
    """Each case whole, as lines for `show --errors` / `--case`: its key and status, its whole reason (the run
    table cuts long ones) and the traceback its worker stored (where it caught the exception)."""
    lines: list[str] = []
    for r in results:
        rep = f" (repetition {r.repetition})" if r.repetition else ""
        lines.append(f"case {r.case_key}{rep}: {r.status}")
        if r.reason:
            lines.append(f"  reason: {r.reason}")
        if r.ok and r.m.validity_reason:
            lines.append(f"  validity: {r.m.validity or 'unknown'} ({r.m.validity_reason})")
        if r.m.traceback:
            lines.append("  traceback, as the worker stored it:")
            lines += [f"    {t}" for t in r.m.traceback.rstrip().splitlines()]
        elif r.status in FAILED:
            lines.append("  traceback: none stored (the worker caught no exception: it was killed, timed out or "
                         "exited on its own; the reason says how)")
        lines.append("")
    return lines


def render_markdown(run: RunRow, env: Environment, results: list[CaseResult],
                    machines: Sequence[MachineShare] | None = None) -> str:
    """The run table as Markdown, the environment first (and the machines, for a run on several)."""
    names = share_names(machines or [])
    cols = columns(names)
    out = [f"# dlperf run `{run.id}`", "",
           f"Study **{run.study}** ({run.variant}), status {run.status}, "
           f"started {run.started_at:%Y-%m-%d %H:%M:%S} UTC, "
           f"{stored_text(run, results)}.", "", "## Environment", ""]
    out += [f"- {line}" for line in environment_lines(env) + machine_lines(machines)]
    out += [f"- energy: {reason}" for reason in energy_reasons(results)]
    out += ["", "## Results", "",
            "Times are per call: the median over samples, IQR as a fraction of the median, and "
            "samples x calls per sample. Rates are computed from the median.", "", validity_line(results), "",
            *(f"{line}\n" for line in noise_lines(results))]
    out.append("| " + " | ".join(column_titles(cols, results)) + " |")
    out.append("|" + "|".join("---" for _ in cols) + "|")
    for row in result_rows(results, names):
        out.append("| " + " | ".join(row[c].replace("|", "\\|") for c in cols) + " |")
    across = across_processes(results, names)
    if across:
        rep_cols = across_columns(names)
        out += ["", "### Repetitions in separate worker processes", "",
                "| " + " | ".join(rep_cols) + " |", "|" + "|".join("---" for _ in rep_cols) + "|"]
        out += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in across]
    return "\n".join(out) + "\n"
