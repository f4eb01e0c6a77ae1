"""A schema-version-1 database as dlperf left it before environments were keyed by identity only, and
the checks that migrating it to version 2 must pass (on SQLite in test_store, on PostgreSQL in test_postgres).

Three environments: A; B, the same machine and software as A measured under DLPERF_MEM_BW_GBS and at
another commit (so another v1 environment, the same v2 one: the step merges them); C, A with another
thread count (another environment in both). One run with one result in each.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import create_engine, insert, inspect, select

from dlperf.hardware.identity import derived, identity_hash
from dlperf.store import Store
from dlperf.store.migrations import _v1_tables
from dlperf.store.schema import MIGRATIONS, SCHEMA_VERSION, environments, metadata, results, runs

GPU = {"index": 0, "name": "NVIDIA L4", "memory_bytes": 24 * 2**30, "driver": "550.54", "cuda_driver": "12.4"}
ENV_A: dict[str, Any] = {
    "cpu_model": "AMD EPYC 7B13", "cpu_flags": ["avx", "avx2", "fma"], "cpu_physical_cores": 2,
    "cpu_logical_cores": 4, "threads": 2, "ram_bytes": 16 * 2**30, "os": "Linux Debian 12", "kernel": "6.1.0",
    "machine": "x86_64", "python": "3.12.3", "hostname_sha256": "0123456789abcdef",
    "gpus": [{**GPU, "peaks_theoretical": {"fp32_flops_per_s": 3.0e13, "peaks_source": "catalog entry l4"}}],
    "gpu_source": "nvml",
    "cpu_peaks_theoretical": {"fp32_flops_per_s": 3.3e11, "mem_bw_bytes_per_s": None, "mem_bw_source": "unknown"},
    "dlperf_version": "0.1.0", "dlperf_git_commit": "a" * 40,
    "frameworks": {"numpy": {"version": "2.2.0", "blas": "openblas 0.3.27"}},
}
ENV_B = {**ENV_A, "dlperf_git_commit": "b" * 40,
         "cpu_peaks_theoretical": {"fp32_flops_per_s": 3.3e11, "mem_bw_bytes_per_s": 50e9,
                                   "mem_bw_source": "DLPERF_MEM_BW_GBS"},
         "gpus": [{**GPU, "peaks_theoretical": {"fp32_flops_per_s": 3.1e13, "peaks_source": "catalog entry l4"}}]}
ENV_C = {**ENV_A, "threads": 1}
ENVS = {"a": ENV_A, "b": ENV_B, "c": ENV_C}


def v1_hash(fp: dict[str, Any]) -> str:
    """The version-1 key of an environment: the whole fingerprint hashed."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:20]


def build_v1(url: str) -> dict[str, int]:
    """A version-1 database at `url` (made by the real first step) holding runs `run-a`, `run-b`, `run-c`,
    one result each, in environments A, B, C. Returns the environments' ids by letter."""
    Store(url, migrations=MIGRATIONS[:1]).engine.dispose()
    _meta, v1_envs, v1_runs, v1_results = _v1_tables()
    engine = create_engine(url)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ids = {}
    with engine.begin() as conn:
        for letter, fp in ENVS.items():
            ids[letter] = conn.execute(insert(v1_envs).values(fingerprint_hash=v1_hash(fp), data=fp, created_at=now)
                                       ).inserted_primary_key[0]
        for letter, env_id in ids.items():
            conn.execute(insert(v1_runs).values(
                id=f"run-{letter}", study="s", variant="full", study_hash="h", study_path="p", filters={},
                settings={}, env_id=env_id, status="interrupted", n_cases=2, dlperf_version="0.1.0", started_at=now))
            conn.execute(insert(v1_results).values(
                run_id=f"run-{letter}", case_key="k", repetition=0, workload="ops", framework="numpy", device="cpu",
                params={}, status="ok", env_id=env_id, started_at=now, finished_at=now))
    engine.dispose()
    assert v1_hash(ENV_A) != v1_hash(ENV_B) and identity_hash(ENV_A) == identity_hash(ENV_B)
    return ids


def columns(url: str) -> dict[str, list[tuple[str, str, bool]]]:
    """Each table's columns (name, type, nullable) as the database reports them."""
    engine = create_engine(url)
    try:
        found = inspect(engine)
        return {t: sorted((c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(t))
                for t in sorted(found.get_table_names())}
    finally:
        engine.dispose()


def check_migrated(url: str, ids: dict[str, int], fresh_url: str) -> None:
    """Open the version-1 database (which migrates it) and check version 2's promises."""
    store = Store(url)
    assert store.schema_version == SCHEMA_VERSION == 4
    a, c = ids["a"], ids["c"]
    with store.engine.connect() as conn:
        envs = dict(conn.execute(select(environments.c.id, environments.c.fingerprint_hash)).all())
        run_envs = dict(conn.execute(select(runs.c.id, runs.c.env_id)).all())
        result_envs = dict(conn.execute(select(results.c.run_id, results.c.env_id)).all())
        run_derived = dict(conn.execute(select(runs.c.id, runs.c.derived)).all())
    # A and B merged into the older row, re-keyed by identity; C stays apart
    assert envs == {a: identity_hash(ENV_A), c: identity_hash(ENV_C)}
    assert run_envs == result_envs == {"run-a": a, "run-b": a, "run-c": c}
    assert run_derived == {f"run-{k}": derived(fp) for k, fp in ENVS.items()}
    # each run still reports the environment it ran in, with its own peaks and commit
    for letter, fp in ENVS.items():
        assert store.run_environment(f"run-{letter}") == fp
    assert store.environment(a) == ENV_A
    # a new fingerprint of the same machine, under yet another override, finds the merged environment
    again = {**ENV_B, "dlperf_git_commit": "c" * 40, "peaks_overrides": {"DLPERF_CPU_CLOCK_GHZ": "3.1"}}
    assert store.environment_id(again, identity_hash(again)) == a
    store.engine.dispose()
    # the same tables as a database made at version 2 from scratch, and as the current table definitions
    Store(fresh_url).engine.dispose()
    assert columns(url) == columns(fresh_url)
    assert {t: [c for c, _, _ in cols] for t, cols in columns(url).items()} == {
        t.name: sorted(c.name for c in t.columns) for t in metadata.sorted_tables}
