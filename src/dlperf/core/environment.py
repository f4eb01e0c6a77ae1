"""The environment fingerprint as stored (`Environment`): what `hardware.identity.fingerprint` builds, the store
keeps (`Store.environment`, `Store.run_environment` with a run's derived figures laid over it) and history,
the matrix and the reports read. It stays a dict (a `TypedDict`): JSON output and bundles write it as it is
stored, and every key may be missing (an old store's fingerprint has fewer). Here, in core/, so that hardware/
and store/ both use it without one importing the other.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Environment(TypedDict, total=False):
    """An environment's fingerprint as stored (identity and derived fields), with a run's derived figures laid
    over it where it is a run's (`Store.run_environment`). The nested records are typed where they are made
    (`hardware`: `FingerprintGpu`, `DevicePeaks`; `runner.ceilings_record`), above the store."""

    # identity (hardware.identity.IDENTITY_KEYS)
    machine_label: str
    cpu_model: str
    cpu_flags: list[str]
    cpu_physical_cores: int
    cpu_logical_cores: int | None
    threads: int
    ram_bytes: int
    os: str
    kernel: str
    machine: str
    python: str
    hostname_sha256: str
    gpus: list[dict[str, Any]]
    frameworks: dict[str, dict[str, Any]]
    # derived: recorded with each run, never hashed
    gpu_source: str
    cpu_peaks_theoretical: dict[str, Any]
    cpu_clock_probe: dict[str, Any]
    peaks_overrides: dict[str, str]
    dlperf_version: str
    dlperf_git_commit: str | None
    # a run's own derived figures (runner.sweep): how its thread count was chosen, its measured ceilings
    threads_source: dict[str, Any]
    ceilings: dict[str, Any]
