"""The commands that reproduce a run, rebuilt from what its run row stores, and what they cannot rebuild.

`cli/run.py` stores with each run: the study's name, the path of its file (as given, or the shipped
file's), its variant (`quick` is `--quick`), the file's hash, the `--framework`/`--device` filters,
the command-line overrides (`--timeout`, `--mem-limit`, `--threads`, `--budget`, `--tdp-w`,
`--profile`, `--steps`) and `--counters`; the derived figures hold the dlperf commit. It does not store
`--wait-idle`, `--max-cases`, `--db` or the folder the command ran in: the caveats say so instead of
guessing.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from dlperf.core.environment import Environment
from dlperf.store.rows import RunRow

#: Override key stored in run.filters["overrides"] -> the `dlperf run` option that sets it.
OPTIONS = {"timeout_s": "--timeout", "mem_limit_mb": "--mem-limit", "threads": "--threads", "budget_s": "--budget",
           "steps": "--steps"}


def study_argument(run: RunRow) -> tuple[str, bool]:
    """(what to give `dlperf run`, whether it is a shipped study's name): a shipped study by its name,
    a user's file by the path stored (as it was given, relative to the folder the run started in)."""
    from dlperf.studies.loader import shipped_studies

    path = run.study_path or ""
    shipped = shipped_studies()
    name = run.study or ""
    if path and Path(path).parent.name == "studies" and Path(path).parent.parent.name == "dlperf" \
            and Path(path).stem in shipped:
        return Path(path).stem, True
    if not path and name in shipped:
        return name, True
    return path or name, False


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def run_command(run: RunRow) -> list[str]:
    """`dlperf run ...` as an argument list, from the stored study, variant, filters and overrides."""
    study, _ = study_argument(run)
    args = ["dlperf", "run", study]
    if run.variant == "quick":
        args.append("--quick")
    filters = run.filters or {}
    for fw in filters.get("frameworks") or []:
        args += ["--framework", str(fw)]
    for dev in filters.get("devices") or []:
        args += ["--device", str(dev)]
    overrides = filters.get("overrides") or {}
    for key, option in OPTIONS.items():
        if overrides.get(key) is not None:
            args += [option, _number(overrides[key])]
    if overrides.get("energy_estimate_tdp_w") is not None:
        args += ["--energy-estimate", "tdp", "--tdp-w", _number(overrides["energy_estimate_tdp_w"])]
    if overrides.get("profile"):
        args.append("--profile")
    if filters.get("counters"):
        args.append("--counters")
    return [*args, "--new"]


def reproduce(run: RunRow, env: Environment) -> tuple[list[str], list[str]]:
    """(shell commands, caveats): check out the commit, run the study again, report it; and each thing the
    store does not say (so the commands cannot)."""
    commands: list[str] = []
    caveats: list[str] = []
    commit = env.get("dlperf_git_commit") or (run.derived or {}).get("dlperf_git_commit")
    if commit and str(commit).endswith("-dirty"):
        commit = str(commit).removesuffix("-dirty")
        commands.append(f"git checkout {shlex.quote(commit)}   # the commit under the run's checkout")
        caveats.append("the run's checkout had changes that were not committed (its commit was recorded as "
                       f"{commit}-dirty): this commit alone may not be the code that measured it")
    elif commit:
        commands.append(f"git checkout {shlex.quote(str(commit))}   # the dlperf commit the run was measured with")
    else:
        caveats.append(f"dlperf's commit was not recorded (version {run.dlperf_version or 'unknown'}): "
                       "check out that release")
    commands.append(shlex.join(run_command(run)))
    commands.append(f"dlperf report latest --format html -o {shlex.quote(str(run.study or 'run'))}.html")
    study, shipped = study_argument(run)
    if not shipped:
        caveats.append(f"the study file is the one at {study!r} when the run started (relative to the folder it "
                       f"started in); its hash was {run.study_hash or 'not stored'}: a changed file is "
                       "another study")
    settings = run.settings or {}
    overrides = (run.filters or {}).get("overrides") or {}
    if settings.get("threads") is not None and overrides.get("threads") is None:
        n = settings["threads"]
        caveats.append(f"dlperf chose {n} thread{'' if n == 1 else 's'} for this run (the physical cores other "
                       f"processes left idle); add --threads {n} to use the same number whatever the load")
    caveats.append("not stored, so not repeated: --wait-idle, --max-cases, and the store (--db / DLPERF_DB)")
    fws = env.get("frameworks") or {}
    if fws:
        versions = ", ".join(f"{name} {info.get('version') or 'missing'}" for name, info in sorted(fws.items()))
        caveats.append(f"the same software: {versions}; Python {env.get('python') or 'unknown'}")
    return commands, caveats
