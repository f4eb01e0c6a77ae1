"""`dlperf compare`: two runs (or two machines' shares of runs) case by case, with intervals, verdicts and a CI
gate (`analysis.compare` does the statistics; this module reads the store and prints). `Percent` and
`REGRESSION_EXIT` are shared with `dlperf history`'s gate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypedDict

import click

from dlperf.cli.options import db_option, new_console, open_store
from dlperf.units import format_number, format_time

if TYPE_CHECKING:
    from dlperf.analysis.machines import MachineShare
    from dlperf.core.environment import Environment
    from dlperf.store.rows import RunRow


class Percent(click.ParamType):
    """A percentage: a finite number >= 0 (`5` or `5%`), kept in percent."""

    name = "PCT"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        import math

        try:
            pct = float(str(value).strip().removesuffix("%"))
        except ValueError:
            self.fail(f"{value!r} is not a percentage (a number such as 5 or 2.5)", param, ctx)
        if not math.isfinite(pct) or pct < 0:
            self.fail(f"{value!r} must be a finite percentage >= 0", param, ctx)
        return pct


REGRESSION_EXIT = 1


def gate_options(min_effect_help: str, fail_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--min-effect` (default 5%) and `--fail-on-regression` as `compare` and `history` take them, each command
    saying in its help what they judge there."""
    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option("--fail-on-regression", "fail_pct", type=Percent(), default=None, metavar="PCT",
                               help=fail_help)(command)
        return click.option("--min-effect", type=Percent(), default=5.0, show_default=True, metavar="PCT",
                            help=min_effect_help)(command)
    return apply


@click.command(epilog=f"Exit status: 0; {REGRESSION_EXIT} with --fail-on-regression when a case regressed or "
               "could not be checked (contended or invalid on either side); 2 on bad input.")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@gate_options("smallest change that counts: a case is faster or slower only when its whole 95% CI of B/A lies "
              "beyond this; inside it, no change",
              f"exit {REGRESSION_EXIT} when a compared case (not contended, not invalid) is slower by more than PCT, "
              "its whole 95% CI above 1+PCT/100, or when a case could not be checked (contended or invalid: the "
              "gate fails closed); the cases are listed")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@db_option
def compare(run_a: str, run_b: str, min_effect: float, fail_pct: float | None, fmt: str, db: str | None) -> None:
    """Per-case ratio RUN_B / RUN_A of per-call times, with its 95% CI, a p-value and a verdict.

    A case's repetitions (one worker process each) are pooled. The ratio is the Hodges-Lehmann estimate on
    log times with its distribution-free CI (Mann-Whitney); with >= 3 processes on both sides, the ratio
    of per-process medians with Welch's t. Contended or invalid cases are never called faster or slower.
    The last line is the geometric mean of B/A over the compared cases.

    A run whose results came from several machines (a fleet run) is compared one machine's share at a time:
    RUN@MACHINE (a machine id prefix or a machine label), e.g. `RUN@w1 RUN@w2` for two machines of one run.
    """
    from dlperf.analysis.compare import NOT_COMPARED, compare_runs, one_process_a_side, regressions, summarize
    from dlperf.analysis.drift import Drift, machine_drift
    from dlperf.analysis.effect import CONFIDENCE
    from dlperf.hardware.identity import diff, identity, one_sided_frameworks

    store = open_store(db, create=False)
    (ra, share_a), (rb, share_b) = _run_share(store, run_a), _run_share(store, run_b)
    env_a, env_b = share_a.env, share_b.env  # the chosen machines' environments
    diffs = diff(identity(env_a), identity(env_b))  # the machine and software; not peaks, version or commit
    diffs, one_side = one_sided_frameworks(diffs)  # a framework one run alone loaded: no shared case ran on it
    threads, diffs, threads_lines = _threads_note(ra, rb, env_a, env_b, diffs)
    threads_lines += [f"{fw}: loaded by run {side.upper()} only (none of the cases both runs measured ran on it)"
                      for fw, side in one_side.items()]
    derived = [key for key, _, _ in diff(env_a, env_b) if key not in {k for k, _, _ in diffs}
               and key != "threads" and not key.startswith("threads_source")  # the threads: their own note
               and key.removeprefix("frameworks.") not in one_side]
    drift = machine_drift(share_a.results, share_b.results)  # the canaries' B/A, or why none
    rows = compare_runs(share_a.results, share_b.results, min_effect / 100, drift)
    summary = summarize(rows, drift if isinstance(drift, Drift) else None)
    failed = regressions(rows, fail_pct) if fail_pct is not None else []
    single = one_process_a_side(rows)
    if fmt == "json":
        import json

        doc = {"run_a": ra.id, "run_b": rb.id, "machine_a": _machine_doc(share_a),
               "machine_b": _machine_doc(share_b), "min_effect_pct": min_effect, "confidence": CONFIDENCE,
               "environment_diffs": [{"key": k, "a": va, "b": vb} for k, va, vb in diffs], "threads": threads,
               "frameworks_one_side": one_side, "derived_diffs": derived,
               "drift": drift if isinstance(drift, str) else asdict(drift),
               "cases": [c.as_dict() for c in rows], "summary": summary.as_dict(),
               "one_process_a_side": [c.case_key for c in single],
               "fail_on_regression_pct": fail_pct, "regressions": [c.case_key for c in failed]}
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        _print_compare(_side_name(ra.id, share_a, run_a), _side_name(rb.id, share_b, run_b), diffs, derived,
                       rows, summary, min_effect, fail_pct, failed, threads_lines,
                       drift if isinstance(drift, str) else drift.line(), len(single))
    unchecked = [c for c in rows if c.verdict in NOT_COMPARED] if fail_pct is not None else []
    if failed:
        alone = sum(c in single for c in failed)
        caveat = (f" ({alone} with one process a side: an interval without the spread from one process to the "
                  "next; confirm with 3 or more)" if alone else "")
        click.echo(f"dlperf: {len(failed)} case(s) slower by more than {fail_pct:g}%{caveat}: "
                   + ", ".join(c.case_key for c in failed), err=True)
    if unchecked:  # the gate fails closed: a case it could not check is not a case that passed
        why = ", ".join(sorted({c.verdict for c in unchecked}))
        click.echo(f"dlperf: {len(unchecked)} case(s) could not be checked ({why}; rerun them on a quiet machine): "
                   + ", ".join(c.case_key for c in unchecked), err=True)
    if failed or unchecked:
        raise click.exceptions.Exit(REGRESSION_EXIT)


def _threads_note(ra: RunRow, rb: RunRow, env_a: Environment, env_b: Environment,
                  diffs: list[Any]) -> tuple[dict[str, Any], list[Any], list[str]]:
    """Each side's threads and how they came about (JSON), the environment differences left once the threads are
    taken out where dlperf chose them for a side, and the lines that say so.

    A run that sets no threads takes the cores other processes leave idle at its start (runner.threads), so two
    runs of one command on one machine can differ in threads by the load alone: that is no other machine or
    software, and the runs are compared as the same environment with a note that the threads differ, and why.
    Where both sides asked for their counts (--threads, a study's threads:), or one side does not say (a run
    stored before this was recorded), the threads stay an environment difference."""
    from dlperf.runner.threads import describe, stored_source

    side = {"a": (ra, env_a), "b": (rb, env_b)}
    doc = {k: {"threads": env.get("threads"), **stored_source(run)} for k, (run, env) in side.items()}
    if not any(key == "threads" for key, _, _ in diffs):
        return doc, diffs, []
    a, b = (describe(doc[k]["threads"], doc[k]) for k in ("a", "b"))
    if not (doc["a"]["chosen"] or doc["b"]["chosen"]):
        return doc, diffs, [f"threads: A {a}; B {b}"]
    lines = [f"threads differ: A {a}; B {b}",
             "  a run that sets no threads uses the cores other processes leave idle when it starts, so runs of one "
             "command can differ; B/A below includes the effect of the thread count (pin --threads to compare "
             "like with like)"]
    return doc, [d for d in diffs if d[0] != "threads"], lines


def _run_share(store: Any, ref: str) -> tuple[RunRow, Any]:
    """RUN or RUN@MACHINE: the run's row and the results of the machine named (a plain RUN: its only machine;
    a run on several machines without @MACHINE, an unknown or ambiguous machine: DlperfError, one line)."""
    from dlperf.analysis.machines import pick_share
    from dlperf.cli.readers import run_shares, split_ref

    run_ref, machine = split_ref(ref)
    run_row, _, shares = run_shares(store, run_ref)
    return run_row, pick_share(shares, machine, run_row.id)


class MachineDoc(TypedDict):
    """A compared side's machine in `compare --format json`: its id, label, short name and environment ids."""

    machine_id: str
    label: str
    name: str
    env_ids: list[int]


def _machine_doc(share: MachineShare) -> MachineDoc:
    return {"machine_id": share.machine_id, "label": share.label, "name": share.name,
            "env_ids": list(share.env_ids)}


def _side_name(run_id: str, share: Any, ref: str) -> str:
    """A side as the table's title names it: the run, and the machine where one was picked with @."""
    return f"{run_id}@{share.name}" if "@" in ref else run_id


def _print_compare(id_a: str, id_b: str, diffs: list[Any], derived: list[str], rows: list[Any], summary: Any,
                   min_effect: float, fail_pct: float | None, failed: list[Any], threads_lines: list[str],
                   drift_line: str = "", single: int = 0) -> None:
    """`compare`'s table: the environment warning, the threads where they differ, one row per case, what the
    columns mean, the summary."""
    from rich.markup import escape
    from rich.table import Table

    from dlperf.analysis.compare import VERDICTS

    console = new_console()
    if derived and not diffs:
        console.print(escape(f"same environment; derived figures differ ({', '.join(derived[:4])})"),
                      highlight=False)
    if diffs:
        sides = "the two machines' shares" if "@" in id_a + id_b else "the two runs"
        console.print(f"[bold yellow]{sides} come from different environments[/] ({len(diffs)} fields differ); "
                      "ratios below compare different machines or software:", highlight=False)
        for key, va, vb in diffs[:12]:
            console.print(escape(f"  {key}: {va!r} -> {vb!r}"), highlight=False)
    for line in threads_lines:
        console.print(escape(line), highlight=False)
    table = Table(title=f"compare A={id_a}  B={id_b}", title_justify="left")
    for col in ("case", "A median", "B median", "B/A [95% CI]", "p", "verdict"):
        table.add_column(escape(col), overflow="fold")
    for c in rows:
        procs = f" [{c.processes_a} vs {c.processes_b} processes]" if max(c.processes_a, c.processes_b) > 1 else ""
        ratio = format_number(c.ratio, ".3f")
        if c.ci_low is not None and c.ci_high is not None:
            ratio += f" [{c.ci_low:.3f}, {c.ci_high:.3f}]"
        style = {"faster": "green", "slower": "red", "contended": "yellow", "invalid": "yellow"}.get(c.verdict)
        table.add_row(escape(c.case_key + procs), format_time(c.median_a_s), format_time(c.median_b_s), escape(ratio),
                      format_number(c.p_value, ".3g"), escape(c.label), style=style)
    console.print(table)
    up = 1 + min_effect / 100
    console.print(f"B/A < 1: B is faster. At --min-effect {min_effect:g}%: slower = the whole 95% CI above {up:.3g}, "
                  f"faster = below {1 / up:.3g}, no change = between the two, inconclusive = crossing one.",
                  highlight=False)
    console.print("B/A and CI: Hodges-Lehmann on log per-call times, p: Mann-Whitney U; with >= 3 processes on "
                  "both sides: per-process medians, p: Welch's t.", highlight=False)
    if drift_line:
        console.print(escape(drift_line), highlight=False)
    if single:
        console.print(f"{single} of the compared cases had one process a side: their intervals hold that process's "
                      "samples only, not how much one process differs from the next (the same case's processes "
                      "have differed by up to 1.9x on a noisy VM); a study's `repetitions: 3` or `dlperf run "
                      "--precision PCT` gives intervals that hold it.", highlight=False)
    counts = ", ".join(f"{summary.counts[v]} {v}" for v in VERDICTS if summary.counts.get(v))
    if summary.geomean is None:
        console.print(escape(f"no case compared ({counts or 'no cases'})"), highlight=False)
    else:
        widened = ", widened by the machine's drift" if summary.drift_widened else ""
        ci = (f" [95% CI {summary.ci_low:.3f}, {summary.ci_high:.3f}, bootstrap over cases{widened}]"
              if summary.ci_low is not None else "")
        console.print(escape(f"geometric mean B/A over {summary.n_compared} compared cases: {summary.geomean:.3f}"
                             f"{ci}; {counts}"), highlight=False)
    if fail_pct is not None:
        verdict_line = (f"regressions beyond +{fail_pct:g}% (whole CI above {1 + fail_pct / 100:.3g}): "
                        + (", ".join(c.case_key for c in failed) if failed else "none"))
        console.print(escape(verdict_line), highlight=False)
