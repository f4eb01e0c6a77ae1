"""A machine, as history and the machine matrix see it: the hardware part of an environment.

`hardware.identity.identity_hash` keys an *environment*: CPU, cores, threads, RAM, OS, GPUs and the
framework versions. History needs a coarser key: a framework upgrade on the same machine is exactly the
change a CI wants to see on one timeline, not the start of a new one. So a machine is keyed by
`MACHINE_KEYS` only (and each GPU by `GPU_MACHINE_KEYS`):

- CPU model, physical and logical cores, RAM rounded to whole GiB (the kernel's MemTotal moves by a few
  MiB between kernel versions, which must not split a machine), the architecture, the host name's hash
  (two identical cloud machines are still two machines; a CI that runs in containers should give the
  container a stable host name) and the GPUs by index, name and memory.

Everything else an environment holds is *software* (`software`): framework versions and their libraries,
dlperf's version and git commit, OS, kernel, Python, the thread count, the CPU flags the kernel exposes,
GPU driver and CUDA driver. History never splits a timeline on them; it marks the run where they changed.
Two different machines are never merged: a different key is a different timeline and a different column.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Fingerprint fields that make a machine (besides `ram_bytes`, compared in whole GiB).
MACHINE_KEYS = ("cpu_model", "cpu_physical_cores", "cpu_logical_cores", "machine", "hostname_sha256")
#: Fields of each GPU record that make it part of a machine (its driver is software).
GPU_MACHINE_KEYS = ("index", "name", "memory_bytes")
#: Top-level software fields whose change history marks on a timeline (frameworks and GPU drivers too).
SOFTWARE_KEYS = ("dlperf_version", "dlperf_git_commit", "os", "kernel", "python", "threads")

GIB = 2**30


def machine_identity(env: dict[str, Any]) -> dict[str, Any]:
    """The hardware part of an environment (module doc): what a machine is for history and the matrix."""
    out: dict[str, Any] = {k: env.get(k) for k in MACHINE_KEYS}
    ram = env.get("ram_bytes")
    out["ram_gib"] = round(ram / GIB) if isinstance(ram, int | float) else None
    gpus = env.get("gpus") if isinstance(env.get("gpus"), list) else []
    out["gpus"] = [{k: g.get(k) for k in GPU_MACHINE_KEYS} for g in gpus if isinstance(g, dict)]
    return out


def machine_id(env: dict[str, Any]) -> str:
    """A short stable id of the machine an environment belongs to (SHA-256 of `machine_identity`)."""
    text = json.dumps(machine_identity(env), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def machine_label(env: dict[str, Any]) -> str:
    """A name a person recognises: CPU model and cores / GPUs / host hash."""
    ident = machine_identity(env)
    cpu = f"{ident['cpu_model'] or 'unknown CPU'}"
    if ident["cpu_physical_cores"]:
        cpu += f" ({ident['cpu_physical_cores']} cores)"
    gpus = ", ".join(str(g.get("name") or "GPU") for g in ident["gpus"]) or "no GPU"
    host = ident["hostname_sha256"]
    return f"{cpu} / {gpus} / host {str(host)[:6] if host else 'unknown'}"


def describe_machine(env: dict[str, Any]) -> str:
    """Every field of the machine's identity on one line, for the notes that keep two machines apart."""
    ident = machine_identity(env)
    gpus = "; ".join(f"#{g['index']} {g['name']} {_gib(g['memory_bytes'])}" for g in ident["gpus"]) or "none"
    return (f"CPU {ident['cpu_model']}, {ident['cpu_physical_cores']} physical / {ident['cpu_logical_cores']} "
            f"logical cores, {ident['ram_gib']} GiB RAM, {ident['machine']}, host sha256 {ident['hostname_sha256']}"
            f", GPUs: {gpus}")


def _gib(nbytes: Any) -> str:
    return f"{nbytes / GIB:.0f} GiB" if isinstance(nbytes, int | float) else "?"


def software(env: dict[str, Any]) -> dict[str, str]:
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


__all__ = ["GPU_MACHINE_KEYS", "MACHINE_KEYS", "SOFTWARE_KEYS", "describe_machine", "format_change",
           "machine_id", "machine_identity", "machine_label", "software", "software_changes"]
