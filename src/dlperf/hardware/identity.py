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
from typing import Any

import psutil

from dlperf import __version__
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
]
