"""`dlperf verdicts [RUN...]`: every seed study's headline claims, put to the test on the user's runs.

With RUNs, those runs are judged; with none, the newest complete run with at least one ok case of each
study a claim needs (mlp, cnn, ops, backends). Read-only: the store is opened without creating anything,
and no plot is drawn.

A claim is never judged on two machines' results pooled: a run whose results came from several machines
(a fleet run) is judged one machine's share at a time, named as `compare` names it, RUN@MACHINE (a machine
id prefix or a machine label); a plain RUN on several machines is refused with compare's one line, and the
default choice passes such a run over (the runs line names it).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import click

from dlperf.cli.options import db_option, new_console, open_store

if TYPE_CHECKING:
    from dlperf.store.rows import RunRow

#: The shipped studies whose runs the claims are judged on, in claims order.
CLAIM_STUDIES = ("mlp", "cnn", "ops", "backends")
VERDICT_STYLE = {"holds": "green", "does not hold": "red", "cannot check here": "yellow"}


def default_runs(store: Any) -> tuple[list[str], list[str], list[str], list[str]]:
    """(ids of the newest complete run of each claim study with at least one ok case that ran on one machine,
    the studies with no such run, the newer complete runs passed over because they stored no ok case, those
    passed over because their results came from several machines)."""
    from dlperf.cli.readers import run_shares

    chosen, never, skipped, several = [], [], [], []
    for study in CLAIM_STUDIES:
        run = None
        for r in (r for r in store.runs_of_study(study) if r.status == "complete"):  # newest first
            _, results, shares = run_shares(store, str(r.id))
            if not any(c.ok for c in results):
                skipped.append(str(r.id))
            elif len(shares) > 1:
                several.append(str(r.id))
            else:
                run = r
                break
        if run is None:
            never.append(study)
        else:
            chosen.append(str(run.id))
    return chosen, never, skipped, several


def runs_line(runs: list[RunRow], never: list[str], given: bool, skipped: list[str] | None = None,
              several: list[str] | None = None) -> str:
    """Which runs were judged, and how they were chosen."""
    used = ", ".join(f"{r.id} ({r.study}{', ' + r.variant if r.variant else ''}, {r.status})"
                     for r in runs) or "none"
    how = "the runs given" if given else "the newest complete run of each study with an ok case"
    line = f"runs judged ({how}): {used}"
    if skipped:
        line += f"; passed over (complete, no ok case): {', '.join(skipped)}"
    if several:
        line += (f"; passed over (results from several machines, never judged pooled; judge one machine's share "
                 f"as RUN@MACHINE): {', '.join(several)}")
    if never:
        line += f"; no complete run with an ok case of {', '.join(never)} in this store"
    return line


@click.command("verdicts")
@click.argument("run_refs", nargs=-1, metavar="[RUN[@MACHINE]]...")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--long", "long_", is_flag=True, help="the table with each claim's text and what it compares")
@db_option
def verdicts(run_refs: tuple[str, ...], fmt: str, long_: bool, db: str | None) -> None:
    """The seed studies' claims, each with a verdict from RUNs (default: the newest complete run of each
    study with an ok case): holds, does not hold (by how much), or cannot check here (and what is missing).
    A run whose results came from several machines is judged one machine at a time: RUN@MACHINE."""
    from dlperf.claims import evaluate
    from dlperf.cli.readers import share_report, split_ref

    store = open_store(db, create=False)
    if run_refs:
        refs = list(run_refs)
        never: list[str] = []
        skipped: list[str] = []
        several: list[str] = []
    else:
        refs, never, skipped, several = default_runs(store)
    # an unknown run, a plain RUN on several machines, an unknown machine: one line, exit 2. share_report reads
    # only; its plot_dir is where reports would draw, and nothing here draws
    named: dict[tuple[str, str], Any] = {}
    for ref in refs:  # a run (or one machine's share) given twice is judged once
        data = share_report(store, ref, None)
        named.setdefault((str(data.run.id), split_ref(ref)[1] or ""), data)
    datas = list(named.values())
    found = evaluate(datas)
    runs = [dataclasses.replace(d.run, id=f"{run_id}@{machine}") if machine else d.run
            for (run_id, machine), d in named.items()]
    if fmt == "json":
        shown = [{"id": r.id, "study": r.study, "variant": r.variant, "status": r.status} for r in runs]
        click.echo(json.dumps({"runs": shown,
                               "studies_never_run": never, "passed_over": skipped,
                               "passed_over_several_machines": several,
                               "verdicts": [dataclasses.asdict(v) for v in found]}, indent=2, default=str))
        return
    print_table(found, runs_line(runs, never, bool(run_refs), skipped, several), long_)


def print_table(found: list[Any], line: str, long_: bool = False) -> None:
    """The verdicts as a rich table, every string escaped, the verdict coloured, then a count (`long_`: with
    each claim's text and quantity; without, the claim ids name them and `--long` or the HTML report says)."""
    from rich.markup import escape
    from rich.table import Table

    console = new_console()
    table = Table(title="the seed studies' claims on these runs", title_justify="left", show_lines=True)
    columns = [("claim", {"no_wrap": True}), ("claim text", {"min_width": 24, "ratio": 3}),
               ("quantity", {"min_width": 16, "ratio": 2}), ("paper", {"min_width": 14, "ratio": 2}),
               ("measured", {"min_width": 10, "ratio": 1}), ("verdict", {"no_wrap": True}),
               ("detail", {"min_width": 24, "ratio": 4})]
    shown = [c for c in columns if long_ or c[0] not in ("claim text", "quantity")]
    for name, kw in shown:
        table.add_column(name, **kw)
    for v in found:
        style = VERDICT_STYLE[v.verdict]
        cells = {"claim": escape(v.claim_id), "claim text": escape(v.text), "quantity": escape(v.quantity),
                 "paper": escape(v.paper), "measured": escape(v.measured or "-"),
                 "verdict": f"[{style}]{escape(v.verdict)}[/{style}]", "detail": escape(v.detail)}
        table.add_row(*(cells[name] for name, _ in shown))
    console.print(escape(line), highlight=False, soft_wrap=True)
    console.print(table)
    counts = {k: sum(v.verdict == k for v in found) for k in VERDICT_STYLE}
    console.print(escape(f"{len(found)} claims: " + ", ".join(f"{n} {k}" for k, n in counts.items())),
                  highlight=False)
