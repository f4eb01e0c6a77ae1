"""`dlperf doctor` and `dlperf list`: what this machine has, and what ships with dlperf."""

from __future__ import annotations

import click

from dlperf.cli.options import new_console


@click.command()
def doctor() -> None:
    """What this machine has: frameworks, devices, energy meters, profilers; and how to get the rest. Then what
    makes its timings noisy (governor, turbo, ASLR, isolated CPUs, SMT, a VM's steal, the canary's spread), each with
    what to change: `no` marks a source of noise, `?` a setting that could not be read."""
    from rich.markup import escape
    from rich.table import Table

    from dlperf.doctor import all_checks

    table = Table(title="dlperf doctor", title_justify="left")
    for col in ("section", "item", "", "detail"):
        table.add_column(col, overflow="fold")
    for c in all_checks():
        mark = "[yellow]?[/]" if c.ok is None else "[green]yes[/]" if c.ok else "[red]no[/]"
        table.add_row(escape(c.section), escape(c.name), mark, escape(c.detail))
    console = new_console()
    console.print(table)
    console.print("noise: `no` marks a setting that adds noise to timings, with what to change; `?` one that "
                  "could not be read here (nothing is assumed for it)", highlight=False)


@click.command("list")
def list_cmd() -> None:
    """Studies that ship with dlperf, workloads, and framework adapters."""
    from rich.markup import escape

    from dlperf.frameworks import REGISTRY as FRAMEWORKS
    from dlperf.studies import shipped_studies
    from dlperf.studies.loader import read_study_file
    from dlperf.workloads import REGISTRY as WORKLOADS

    console = new_console()
    console.print("[bold]studies[/]")
    for name, path in shipped_studies().items():
        sf = read_study_file(path)
        quick = " (has --quick)" if sf.quick else ""
        console.print(escape(f"  {name:<17} {sf.description}{quick}"), highlight=False)
    console.print("[bold]workloads[/]")
    for name, cls in sorted(WORKLOADS.items()):
        w = cls()
        line = f"  {name:<17} {w.description} [frameworks: {', '.join(w.frameworks())}]"
        console.print(escape(line), highlight=False)
    console.print("[bold]frameworks[/]")
    for name, cls in sorted(FRAMEWORKS.items()):
        fw = cls()
        state = f"installed {fw.version}" if fw.available() else f"not installed ({fw.install_hint})"
        console.print(escape(f"  {name:<17} {state}"), highlight=False)
