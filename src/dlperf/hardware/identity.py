"""The environment fingerprint: what machine and software a result was measured on.

Two results are comparable only when they share an environment, or when the comparison says how
their fingerprints differ. A fingerprint holds two kinds of fields:
- identity (`IDENTITY_KEYS`, and `GPU_IDENTITY_KEYS` of each GPU): the machine and software
  themselves. Only these are hashed (`identity_hash`): the environment a result belongs to.
- derived: the theoretical peaks (which change with the catalog and the DLPERF_* overrides), the
  clock probe's measured clock and FMA rate (`hardware.peak_cache`: measured once per machine and reused), the
  overrides in force, how the GPUs were read, dlperf's version and git commit. Recorded with each
  run (`derived`), never hashed: editing the catalog, setting DLPERF_MEM_BW_GBS or committing leaves
  the environment, and a run started before can be resumed.
The framework part imports frameworks, so the runner collects it in a worker process, never in the
CLI process.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
from collections.abc import Mapping
from typing import Any, Final, NotRequired, TypedDict

import psutil

from dlperf import __version__
from dlperf.core.environment import Environment
from dlperf.hardware import peak_cache, peaks, probe
from dlperf.hardware.catalog_peaks import DevicePeaks
from dlperf.hardware.probe import GpuRecord

#: Top-level fingerprint fields that identify an environment (everything else is derived).
IDENTITY_KEYS = ("cpu_model", "cpu_flags", "cpu_physical_cores", "cpu_logical_cores", "threads", "ram_bytes", "os",
                 "kernel", "machine", "python", "hostname_sha256", "gpus", "frameworks", "machine_label")
#: The environment variable that names a machine (`dlperf fleet worker --label`): part of its identity where set,
#: so two machines a fingerprint cannot tell apart (identical cloud instances, two fleet workers on one host) are
#: kept apart; absent where unset, so the environments of unlabelled machines are as they always were.
MACHINE_LABEL_ENV = "DLPERF_MACHINE_LABEL"
#: Fields of each GPU record that identify it (its peaks are derived).
GPU_IDENTITY_KEYS = ("index", "name", "memory_bytes", "driver", "cuda_driver")
#: Fingerprint fields that make a machine (besides `ram_bytes`, compared in whole GiB).
MACHINE_KEYS = ("cpu_model", "cpu_physical_cores", "cpu_logical_cores", "machine", "hostname_sha256")
#: Fields of each GPU record that make it part of a machine (its driver is software).
GPU_MACHINE_KEYS = ("index", "name", "memory_bytes")
GIB = 2**30
#: The fingerprint field that names a machine (hardware.identity.MACHINE_LABEL_ENV), part of it where set.
LABEL_KEY: Final = "machine_label"


def host_fingerprint(threads: int | None = None) -> dict[str, Any]:
    """Everything about the host that does not need a framework import: identity and derived fields."""
    gpus, gpu_source = probe.nvidia_gpus()
    uname = platform.uname()
    label = os.environ.get(MACHINE_LABEL_ENV, "").strip()
    return ({"machine_label": label} if label else {}) | {
        "cpu_model": probe.cpu_model(),
        "cpu_flags": probe.cpu_flags(),
        "cpu_physical_cores": probe.physical_cores(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "threads": threads or probe.default_threads(),
        "ram_bytes": psutil.virtual_memory().total,
        "os": f"{uname.system} {probe.os_release()}".strip(),
        "kernel": uname.release,
        "machine": uname.machine,
        "python": platform.python_version(),
        "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "gpus": [_gpu_record(g) for g in gpus],
        "gpu_source": gpu_source,
        "cpu_peaks_theoretical": peaks.cpu_peaks(),
        "cpu_clock_probe": peak_cache.sustained().as_dict(),  # this machine's: derived, never identity
        "peaks_overrides": peaks.overrides_in_force(),
        "dlperf_version": __version__,
        "dlperf_git_commit": probe.git_commit(),
    }


class FingerprintGpu(GpuRecord, total=False):
    """A GPU as the fingerprint records it (`_gpu_record`): the probe's record without NVML's properties, with
    the peaks derived from them."""

    peaks_theoretical: DevicePeaks


def _gpu_record(gpu: GpuRecord) -> FingerprintGpu:
    """A probed GPU as the fingerprint records it: its facts, and its peaks where NVML gave its properties."""
    out: FingerprintGpu = {**gpu}
    out.pop("properties", None)
    found = peaks.gpu_peaks(gpu)
    if found is not None:
        out["peaks_theoretical"] = found
    return out


def framework_fingerprint(names: list[str]) -> dict[str, Any]:
    """Version and underlying libraries of each named framework (imports them)."""
    from dlperf.frameworks import get_framework

    out: dict[str, Any] = {}
    for name in sorted(set(names)):
        fw = get_framework(name)
        if not fw.available():
            out[name] = {"version": None, "missing": fw.install_hint}
            continue
        try:
            out[name] = fw.info()
        except Exception as exc:  # a broken install is recorded, not fatal
            out[name] = {"version": fw.version, "error": f"{type(exc).__name__}: {exc}"}
    return out


def fingerprint(framework_names: list[str], threads: int | None = None) -> dict[str, Any]:
    """The full fingerprint: host plus the frameworks a run uses."""
    fp = host_fingerprint(threads)
    fp["frameworks"] = framework_fingerprint(framework_names)
    return fp


def identity(fp: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a fingerprint that identify its environment (`IDENTITY_KEYS`; GPUs by `GPU_IDENTITY_KEYS`)."""
    out = {k: fp[k] for k in IDENTITY_KEYS if k in fp}
    if isinstance(out.get("gpus"), list):
        out["gpus"] = [{k: g[k] for k in GPU_IDENTITY_KEYS if k in g} for g in out["gpus"]]
    return out


def derived(fp: dict[str, Any]) -> dict[str, Any]:
    """What a run records beside its environment: every field that is not identity, and the GPU
    records whole (their peaks are derived). Laid over the environment's data, it gives back `fp`."""
    out = {k: v for k, v in fp.items() if k not in IDENTITY_KEYS}
    if "gpus" in fp:
        out["gpus"] = fp["gpus"]
    return out


def identity_hash(fp: dict[str, Any]) -> str:
    """Stable identity of an environment: its identity fields only (canonical JSON, SHA-256)."""
    return hashlib.sha256(json.dumps(identity(fp), sort_keys=True, default=str).encode()).hexdigest()[:20]


def diff(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Fields that differ between two fingerprints, as (dotted key, a, b)."""
    out: list[tuple[str, Any, Any]] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append((f"{prefix}{key}", va, vb))
    return out


def one_sided_frameworks(diffs: list[tuple[str, Any, Any]]) -> tuple[list[tuple[str, Any, Any]], dict[str, str]]:
    """`diffs` less each framework only one side's environment holds, and those (name -> "a" or "b", the side that
    has it). A run records the frameworks it loaded, so such a framework ran cases in one run only: no case both
    runs measured ran on it, and it does not make the runs' shared cases another environment's."""
    one = {key.split(".", 1)[1]: ("b" if va is None else "a") for key, va, vb in diffs
           if key.startswith("frameworks.") and key.count(".") == 1 and (va is None) != (vb is None)}
    return [d for d in diffs if d[0].removeprefix("frameworks.") not in one], one


__all__ = [
    "GPU_IDENTITY_KEYS",
    "IDENTITY_KEYS",
    "derived",
    "diff",
    "fingerprint",
    "framework_fingerprint",
    "host_fingerprint",
    "identity",
    "identity_hash",
    "one_sided_frameworks",
]


# A machine, as history and the machine matrix see it: the hardware part of an environment (a framework upgrade
# on one machine stays on its timeline; analysis/machines splits runs by it).

class GpuIdentity(TypedDict):
    """A GPU as part of a machine (`GPU_MACHINE_KEYS`), as the fingerprint recorded it (None: not recorded)."""

    index: int | None
    name: str | None
    memory_bytes: int | None


class MachineIdentity(TypedDict):
    """The hardware part of an environment (`MACHINE_KEYS`, RAM in whole GiB, the GPUs; the label only where
    set), as the fingerprint recorded it (None: not recorded)."""

    cpu_model: str | None
    cpu_physical_cores: int | None
    cpu_logical_cores: int | None
    machine: str | None
    hostname_sha256: str | None
    machine_label: NotRequired[str]
    ram_gib: int | None
    gpus: list[GpuIdentity]


def machine_identity(env: Environment) -> MachineIdentity:
    """The hardware part of an environment (module doc): what a machine is for history and the matrix."""
    out: MachineIdentity = {  # MACHINE_KEYS, in their order
        "cpu_model": env.get("cpu_model"), "cpu_physical_cores": env.get("cpu_physical_cores"),
        "cpu_logical_cores": env.get("cpu_logical_cores"), "machine": env.get("machine"),
        "hostname_sha256": env.get("hostname_sha256"), "ram_gib": None, "gpus": []}
    if env.get(LABEL_KEY):  # only where set: an unlabelled machine's id does not change
        out[LABEL_KEY] = str(env[LABEL_KEY])
    ram = env.get("ram_bytes")
    out["ram_gib"] = round(ram / GIB) if isinstance(ram, int | float) else None
    found = env.get("gpus")
    gpus = found if isinstance(found, list) else []
    out["gpus"] = [{"index": g.get("index"), "name": g.get("name"), "memory_bytes": g.get("memory_bytes")}
                   for g in gpus if isinstance(g, dict)]  # GPU_MACHINE_KEYS, in their order
    return out


def machine_id(env: Environment) -> str:
    """A short stable id of the machine an environment belongs to (SHA-256 of `machine_identity`)."""
    text = json.dumps(machine_identity(env), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def machine_label(env: Environment) -> str:
    """A name a person recognises: its label where it has one, then CPU model and cores / GPUs / host hash."""
    ident = machine_identity(env)
    cpu = f"{ident['cpu_model'] or 'unknown CPU'}"
    if ident["cpu_physical_cores"]:
        cpu += f" ({ident['cpu_physical_cores']} cores)"
    gpus = ", ".join(str(g.get("name") or "GPU") for g in ident["gpus"]) or "no GPU"
    host = ident["hostname_sha256"]
    text = f"{cpu} / {gpus} / host {str(host)[:6] if host else 'unknown'}"
    return f"{ident[LABEL_KEY]}: {text}" if ident.get(LABEL_KEY) else text


def short_name(env: Environment) -> str:
    """The shortest name that tells a machine apart in a column: its label, else the first 8 of its id."""
    label = machine_identity(env).get(LABEL_KEY)
    return str(label) if label else machine_id(env)[:8]


def describe_machine(env: Environment) -> str:
    """Every field of the machine's identity on one line, for the notes that keep two machines apart."""
    ident = machine_identity(env)
    gpus = "; ".join(f"#{g['index']} {g['name']} {_gib(g['memory_bytes'])}" for g in ident["gpus"]) or "none"
    label = f"label {ident[LABEL_KEY]}, " if ident.get(LABEL_KEY) else ""
    return (f"{label}CPU {ident['cpu_model']}, {ident['cpu_physical_cores']} physical / {ident['cpu_logical_cores']} "
            f"logical cores, {ident['ram_gib']} GiB RAM, {ident['machine']}, host sha256 {ident['hostname_sha256']}"
            f", GPUs: {gpus}")


def _gib(nbytes: Any) -> str:
    return f"{nbytes / GIB:.0f} GiB" if isinstance(nbytes, int | float) else "?"
