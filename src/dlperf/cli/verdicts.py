"""`dlperf verdicts [RUN...]`: every seed study's headline claims, put to the test on the user's runs.

With RUNs, those runs are judged; with none, the newest complete run with at least one ok case of each
study a claim needs (mlp, cnn, ops, backends). Read-only: the store is opened without creating anything,
and no plot is drawn.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click

from dlperf.cli.options import db_option, new_console, open_store

#: The shipped studies whose runs the claims are judged on, in claims order.
CLAIM_STUDIES = ("mlp", "cnn", "ops", "backends")
VERDICT_STYLE = {"holds": "green", "does not hold": "red", "cannot check here": "yellow"}


def default_runs(store: Any) -> tuple[list[str], list[str], list[str]]:
    """(ids of the newest complete run of each claim study with at least one ok case, the studies with no
    complete run, the newer complete runs passed over because they stored no ok case)."""
    chosen, never, skipped = [], [], []
    for study in CLAIM_STUDIES:
        complete = [r for r in store.runs_of_study(study) if r["status"] == "complete"]  # newest first
        run = next((r for r in complete if any(c.ok for c in store.results(str(r["id"])))), None)
        if run is None:
            never.append(study)
        else:
            chosen.append(str(run["id"]))
        skipped += [str(r["id"]) for r in complete[: complete.index(run) if run else len(complete)]]
    return chosen, never, skipped


def runs_line(runs: list[dict[str, Any]], never: list[str], given: bool, skipped: list[str] | None = None) -> str:
    """Which runs were judged, and how they were chosen."""
    used = ", ".join(f"{r['id']} ({r['study']}{', ' + r['variant'] if r.get('variant') else ''}, {r['status']})"
                     for r in runs) or "none"
    how = "the runs given" if given else "the newest complete run of each study with an ok case"
    line = f"runs judged ({how}): {used}"
    if skipped:
        line += f"; passed over (complete, no ok case): {', '.join(skipped)}"
    if never:
        line += f"; no complete run with an ok case of {', '.join(never)} in this store"
    return line


@click.command("verdicts")
@click.argument("run_refs", nargs=-1, metavar="[RUN]...")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--long", "long_", is_flag=True, help="the table with each claim's text and what it compares")
@db_option
def verdicts(run_refs: tuple[str, ...], fmt: str, long_: bool, db: str | None) -> None:
    """The seed studies' claims, each with a verdict from RUNs (default: the newest complete run of each
    study with an ok case): holds, does not hold (by how much), or cannot check here (and what is missing)."""
    from dlperf.cli.readers import report_data
    from dlperf.report.claims import evaluate

    store = open_store(db, create=False)
    if run_refs:
        ids = list(dict.fromkeys(store.resolve_run(ref) for ref in run_refs))  # an unknown run: one line, exit 2
        never: list[str] = []
        skipped: list[str] = []
    else:
        ids, never, skipped = default_runs(store)
    # report_data reads only; its plot_dir is where reports would draw, and nothing here draws
    datas = [report_data(store, run_id, None) for run_id in ids]
    found = evaluate(datas)
    runs = [d.run for d in datas]
    if fmt == "json":
        click.echo(json.dumps({"runs": [{k: r.get(k) for k in ("id", "study", "variant", "status")} for r in runs],
                               "studies_never_run": never, "passed_over": skipped,
                               "verdicts": [dataclasses.asdict(v) for v in found]}, indent=2, default=str))
        return
    print_table(found, runs_line(runs, never, bool(run_refs), skipped), long_)


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
