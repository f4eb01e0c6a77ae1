"""A machine, as history and the machine matrix see it: the hardware part of an environment.

`hardware.identity.identity_hash` keys an *environment*: CPU, cores, threads, RAM, OS, GPUs and the
framework versions. History needs a coarser key: a framework upgrade on the same machine is exactly the
change a CI wants to see on one timeline, not the start of a new one. So a machine is keyed by
`MACHINE_KEYS` only (and each GPU by `GPU_MACHINE_KEYS`; both, and `machine_id`, in `hardware.identity`):

- CPU model, physical and logical cores, RAM rounded to whole GiB (the kernel's MemTotal moves by a few
  MiB between kernel versions, which must not split a machine), the architecture, the host name's hash
  (two identical cloud machines are still two machines; a CI that runs in containers should give the
  container a stable host name) and the GPUs by index, name and memory;
- the machine's label (`machine_label`, `DLPERF_MACHINE_LABEL`: a fleet worker's name), only where the
  environment has one: two machines a fingerprint cannot tell apart are kept apart by it, and the ids of
  unlabelled machines are what they always were.

A run's results may come from several machines (a fleet run: each result row's `env_id` is the machine
that ran it): `split_by_machine` gives each machine's share of a run, `pick_share` one share by a machine
id prefix or label (`RUN@MACHINE`).

Everything else an environment holds is *software* (`software`): framework versions and their libraries,
dlperf's version and git commit, OS, kernel, Python, the thread count, the CPU flags the kernel exposes,
GPU driver and CUDA driver. History never splits a timeline on them; it marks the run where they changed.
Two different machines are never merged: a different key is a different timeline and a different column.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from dlperf.core.environment import Environment
from dlperf.core.result import CaseResult
from dlperf.errors import DlperfError
from dlperf.hardware.identity import LABEL_KEY, machine_id, machine_label, short_name

#: Top-level software fields whose change history marks on a timeline (frameworks and GPU drivers too).
SOFTWARE_KEYS = ("dlperf_version", "dlperf_git_commit", "os", "kernel", "python", "threads")

@dataclass(frozen=True)
class MachineShare:
    """One machine's part of a run: the results it ran, the environment they name (the run's own where that is
    among them, else the one most of them name) and every environment id they name."""

    machine_id: str
    label: str  # machine_label(env)
    name: str  # short_name(env): what a column or a RUN@MACHINE shows
    env: Environment
    env_ids: tuple[int, ...]
    results: list[CaseResult]

    def describe(self) -> str:
        """'4f2a9c01d3e5 (w1: CPU ... / no GPU / host 1a2b3c), 12 results', for one-line errors and notes."""
        return f"{self.machine_id} ({self.label}), {len(self.results)} result{'s' * (len(self.results) != 1)}"


def split_by_machine(results: Sequence[CaseResult], envs: Mapping[int, Environment], run_env_id: int,
                     run_env: Environment) -> list[MachineShare]:
    """A run's results by the machine that ran them (each row's `env_id`; `envs`: every environment they name,
    by id), ordered by short name; a run with no results is one share: its own machine's. An env id missing
    from `envs` is a KeyError: results are never put on a machine they did not run on."""
    all_envs = {k: cast(Environment, dict(v)) for k, v in {**envs, run_env_id: run_env}.items()}
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        groups.setdefault(machine_id(all_envs[r.env_id]), []).append(r)
    if not groups:
        groups[machine_id(all_envs[run_env_id])] = []
    shares = []
    for mid, rows in groups.items():
        counts = Counter(r.env_id for r in rows)
        env_id = run_env_id if run_env_id in counts or not counts else counts.most_common(1)[0][0]
        env = all_envs[env_id]
        shares.append(MachineShare(mid, machine_label(env), short_name(env), env,
                                   tuple(sorted(counts)) or (run_env_id,), rows))
    return sorted(shares, key=lambda s: (s.name, s.machine_id))


def share_names(shares: Sequence[MachineShare]) -> dict[int, str]:
    """The machine column of a run's table, by env id: each share's short name (with its id's first 8 where two
    shares have the same label); {} for a run on one machine (its table has no machine column)."""
    if len(shares) < 2:
        return {}
    names = Counter(s.name for s in shares)
    return {env_id: s.name if names[s.name] == 1 else f"{s.name} {s.machine_id[:8]}"
            for s in shares for env_id in s.env_ids}


def pick_share(shares: Sequence[MachineShare], selector: str | None, run_id: str) -> MachineShare:
    """The share RUN@SELECTOR names: the machine whose label is SELECTOR, else whose id starts with it; a plain
    RUN (None) only where the run ran on one machine. No, or more than one, match: DlperfError (one line)."""
    known = "; ".join(s.describe() for s in shares)
    if selector is None:
        if len(shares) == 1:
            return shares[0]
        raise DlperfError(f"run {run_id} ran on {len(shares)} machines ({known}): name one machine's share as "
                          f"{run_id}@MACHINE (a machine id prefix or a machine label)")
    if not selector.strip():
        raise DlperfError(f"{run_id}@: no machine after '@' (a machine id prefix or a machine label; its "
                          f"machines: {known})")
    found = [s for s in shares if s.env.get(LABEL_KEY) == selector] or [
        s for s in shares if s.machine_id.startswith(selector)]
    if len(found) == 1:
        return found[0]
    what = "matches no machine" if not found else "is ambiguous: it matches several machines"
    raise DlperfError(f"{run_id}@{selector}: {selector!r} {what} of run {run_id} (its machines: {known})")


def software(env: Mapping[str, Any]) -> dict[str, str]:
    """The software an environment ran (module doc), flat: {'numpy': '2.4.6', 'numpy.blas': ..., 'kernel': ...}.

    A framework's version is keyed by its name alone; its other scalar facts as NAME.FIELD."""
    out: dict[str, str] = {}
    for key in SOFTWARE_KEYS:
        if env.get(key) is not None:
            out[key] = str(env[key])
    flags = env.get("cpu_flags")
    if flags:
        out["cpu_flags"] = hashlib.sha256(json.dumps(flags, default=str).encode()).hexdigest()[:8]
    for name, info in sorted((env.get("frameworks") or {}).items()):
        if not isinstance(info, dict):
            continue
        for field, value in info.items():
            if value is None or isinstance(value, dict | list) or field.endswith("threads"):
                continue  # a framework's thread count echoes the run's `threads`
            out[name if field == "version" else f"{name}.{field}"] = str(value)
    for g in env.get("gpus") or []:
        if isinstance(g, dict):
            for field in ("driver", "cuda_driver"):
                if g.get(field) is not None:
                    out[f"gpu{g.get('index', '')}.{field}"] = str(g[field])
    return out


def software_changes(before: dict[str, str], after: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    """What changed from one run's software to the next: (field, old, new), old or new None where absent."""
    keys = sorted(set(before) | set(after))
    return [(k, before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k)]


def format_change(key: str, old: str | None, new: str | None) -> str:
    """One change as a short phrase ('numpy 1.26.4 -> 2.0.0', 'commit 9a3ae34 -> 1b2c3d4')."""
    def short(v: str | None) -> str:
        if v is None:
            return "none"
        return v[:7] if key == "dlperf_git_commit" else v

    name = {"dlperf_git_commit": "commit", "dlperf_version": "dlperf"}.get(key, key)
    return f"{name} {short(old)} -> {short(new)}"


__all__ = ["SOFTWARE_KEYS", "MachineShare", "format_change", "pick_share", "share_names", "software",
           "software_changes", "split_by_machine"]
