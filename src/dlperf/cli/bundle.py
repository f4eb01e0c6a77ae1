"""`dlperf bundle export` / `import`: a run carried as one file to a store its machine cannot reach
(store.bundle holds the format and the logic; this module parses, calls and prints)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dlperf.cli.options import db_option, open_store

if TYPE_CHECKING:
    from dlperf.store.bundle import Bundle


@click.group()
def bundle() -> None:
    """Carry a run between stores as one file: export it where it ran (a machine that cannot reach the shared
    store, a Jetson on a bench), import it into any store (SQLite or PostgreSQL)."""


@bundle.command("export", epilog="A bundle is for `dlperf bundle import`: complete (the run row, every environment "
                "its results refer to, every result with its raw samples, the study file's text where the file "
                "still gives the run's study hash) and versioned "
                "(format name and version, the dlperf that wrote it, when, a checksum). `dlperf export --format "
                "json` is a readable report of the results, not meant to be read back.")
@click.argument("run_ref", metavar="RUN")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="the bundle's file [default: RUN.dlperf.json.gz in this folder]; never replaces what is not a "
                   "bundle (a database, a device, a FIFO, any other file)")
@click.option("--force", is_flag=True, help="replace the bundle already at FILE")
@db_option
def export_cmd(run_ref: str, output: Path | None, force: bool, db: str | None) -> None:
    """Write RUN (an id, a unique prefix, or `latest`) as one gzip-compressed JSON bundle.

    A run still being executed, or interrupted, is written as it is (a partial bundle, said so); export it again
    when it has ended: importing the newer bundle adds only the results the store lacks."""
    from dlperf.store.bundle import SUFFIX, export_bundle
    from dlperf.untrusted import path_component

    store = open_store(db, create=False)
    run_id = store.resolve_run(run_ref)
    path = output or Path(f"{path_component(run_id)}{SUFFIX}")
    written = export_bundle(store, run_id, path, study_reader=checked_study_text, force=force)
    run, content = written.run, written.content
    size_kb = path.stat().st_size / 1024
    click.echo(f"wrote {path} ({size_kb:,.1f} KB): run {run_id}, {len(content['results'])} of {run['n_cases']} "
               f"cases, {len(content['environments'])} environment(s), "
               + ("study file included" if content["study"]["yaml"] is not None else
                  f"study file not included ({content['study']['note']})"))
    if written.partial:
        lease = store.lease(run_id) if run["status"] == "running" else None
        who = f" (executed by {lease.describe()})" if lease is not None else ""
        click.echo(f"partial: run {run_id} was {run['status']}{who} when exported; export it again once it has "
                   f"ended and import that: only the missing results are added")


@bundle.command("import", epilog="A bundle is untrusted input: it is read only from a regular file, inflated at "
                "most to --max-mb, and every row is checked (strict ids, the store's column widths, each result's "
                "parameters against its workload's) before one transaction writes it.")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--max-mb", type=click.FloatRange(min=0, min_open=True, max=1e9), default=None, metavar="MB",
              help="the most the bundle may inflate to [env DLPERF_BUNDLE_MAX_MB; default 256]")
@db_option
def import_cmd(file: Path, max_mb: float | None, db: str | None) -> None:
    """Load the bundle FILE into the store (made where it does not exist): its environments matched by fingerprint
    (never duplicated), the run under its own id, the results the store lacks. Importing it again adds
    nothing; a newer bundle of the same run adds the missing results and its status. One transaction: a
    refused bundle (not a bundle, truncated, edited, a newer format, another run under the same id, a run
    that a live process is executing in that store) writes nothing. The study file's text that a bundle
    carries is not stored (a store has no place for it): keep the bundle."""
    from dlperf.runner.lifecycle import lease_stale_s
    from dlperf.store.bundle import import_bundle, read_bundle
    from dlperf.store.bundle.file import max_bundle_bytes
    from dlperf.untrusted import printable

    loaded = read_bundle(file, max_bundle_bytes(max_mb))  # before the store is opened: a bad file creates no store
    check_environments(loaded, str(file))
    check_params(loaded, str(file))
    outcome = import_bundle(open_store(db), loaded, lease_stale_s=lease_stale_s())
    click.echo(printable(outcome.line()))
    if loaded.partial:
        run = loaded.run
        click.echo(f"partial: the bundle holds {len(loaded.content['results'])} of {run['n_cases']} cases of a "
                   f"run that was {run['status']} when exported")


def checked_study_text(run: dict[str, Any]) -> tuple[str | None, str]:
    """(the text of the file at the run's study path, where it was read) where that file still gives the run's
    study hash (loaded as the run's variant), else (None, why not): a file edited since, or another file at
    that path on this machine, is not what the run ran."""
    from dlperf.errors import DlperfError
    from dlperf.studies.loader import load_study

    where, wanted = str(run["study_path"]), run["study_hash"]
    path = Path(where).expanduser()
    rest = "the run row holds what the store has: the study's name, variant, hash and resolved settings"
    if not where or not path.is_file():
        return None, f"the study file {where!r} is not a file here; {rest}"
    try:
        text = path.read_text(encoding="utf-8")
        got = load_study(str(path), quick=run["variant"] == "quick").study_hash
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"the study file {path} could not be read ({exc}); {rest}"
    except DlperfError as exc:
        return None, f"the file at {path} has changed since the run (it no longer loads: {exc}); {rest}"
    if got != wanted:
        return None, (f"the file at {path} has changed since the run (its study hash is {got}, the run's {wanted}; "
                      f"or the run ran a selection of it, as `dlperf serve` can); {rest}")
    return text, f"read from {path.resolve()} at export; it gives the run's study hash ({wanted})"


def check_environments(loaded: Bundle, name: str) -> None:
    """Each environment's fingerprint gives its hash (`hardware.identity.identity_hash`, which the store
    cannot import): an environment is matched by its hash, so a bundle's edited fingerprint would otherwise
    be stored, or dropped for the one already under that hash, without a word."""
    from dlperf.hardware.identity import identity_hash
    from dlperf.store.bundle import BundleError

    for env in loaded.content["environments"]:
        got = identity_hash(env["data"])
        if got != env["fingerprint_hash"]:
            raise BundleError(f"{name}: environment {env['fingerprint_hash'][:12]}'s fingerprint does not give its "
                              f"hash (it gives {got[:12]}): edited, or not written by dlperf; nothing was imported")


def check_params(loaded: Bundle, name: str) -> None:
    """Each result's parameters as its workload's Params wants them (the store cannot import the workloads):
    a parameter no study could give (an op that is not an op) would stop every report of the run."""
    from pydantic import ValidationError

    from dlperf.store.bundle import BundleError
    from dlperf.untrusted import printable
    from dlperf.workloads import REGISTRY

    for r in loaded.content["results"]:
        what = f"result {r['case_key']!r} repetition {r['repetition']}"
        workload = REGISTRY.get(r["workload"])
        if workload is None:
            raise BundleError(f"{name}: {what}'s workload {r['workload']!r} is not one this dlperf knows (known: "
                              f"{', '.join(sorted(REGISTRY))}); nothing was imported")
        try:
            parsed = workload.Params.model_validate(r["params"])
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(["params", *map(str, first["loc"])])
            got = "" if first["type"] == "missing" else f" (got {first['input']!r:.60})"
            raise BundleError(printable(f"{name}: {what}'s {field}: {first['msg']}{got}; nothing was "
                                        f"imported")) from None
        # a run stores every parameter its case had (None ones left out): a missing one would be a default
        # assumed for a result measured elsewhere, and the reports read each one
        missing = [k for k in parsed.canonical() if k not in r["params"]]
        if missing:
            raise BundleError(printable(f"{name}: {what}'s params.{missing[0]}: missing (a stored result holds "
                                        f"every parameter of its case; no default is assumed); nothing was "
                                        f"imported"))
