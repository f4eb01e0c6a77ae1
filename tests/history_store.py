"""Synthetic histories for the history and matrix tests: runs of one study written straight into a temp SQLite
store, each case with raw samples drawn from a seeded generator around a chosen level."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import update

from dlperf.core.result import Metrics
from dlperf.hardware.identity import identity_hash
from dlperf.store import Store
from dlperf.store.schema import runs
from tests.factories import case, samples_of, stored

STUDY = "hist"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "ops/numpy/cpu/dtype=float32,op=add,size_mb={}"


def environment(machine: str = "m1", numpy: str = "1.26.4", threads: int = 1, commit: str = "a" * 40) -> dict:
    """A fingerprint: the machine's hardware from its name, the software as given."""
    return {"cpu_model": f"Test CPU {machine}", "cpu_physical_cores": 4, "cpu_logical_cores": 8, "threads": threads,
            "ram_bytes": 16 * 2**30, "os": "Linux Test 1", "kernel": "6.1", "machine": "x86_64", "python": "3.11.7",
            "hostname_sha256": f"host-{machine}", "gpus": [], "frameworks": {"numpy": {"version": numpy}},
            "dlperf_version": "0.1.0", "dlperf_git_commit": commit}


def params_of(key: str) -> dict:
    """The params a case key names ('dtype=float32,op=add,size_mb=1.0'), numbers as numbers, as real ops
    results store them (the study report of a run reads them)."""
    out: dict = {}
    for kv in key.rsplit("/", 1)[-1].split(","):
        name, _, value = kv.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            out[name] = value
    return out


def add_run(store: Store, number: int, cases: dict[str, float | str], *, seed: int, machine: str = "m1",
            numpy: str = "1.26.4", threads: int = 1, status: str = "complete", validity: str | None = "valid",
            samples: int = 60, sample_sigma: float = 0.03, study: str = STUDY) -> str:
    """Run `number` (started `number` hours after T0) with each case's per-call times around its level in
    seconds (lognormal, `sample_sigma`), or a failed case where the value is a status ('timeout', ...)."""
    fp = environment(machine, numpy, threads)
    env_id = store.environment_id(fp, identity_hash(fp))
    derived = {"dlperf_version": fp["dlperf_version"], "dlperf_git_commit": fp["dlperf_git_commit"]}
    run_id = store.create_run(study=study, variant="quick", study_hash="h", study_path="p", filters={},
                              settings={"threads": threads}, env_id=env_id, n_cases=len(cases),
                              dlperf_version="0.1.0", derived=derived)
    started = T0 + timedelta(hours=number)
    rng = np.random.default_rng(seed)
    for key, level in cases.items():
        if isinstance(level, str):
            store.add_result(case(key, run_id=run_id, params=params_of(key), status=level, reason=f"{level} on purpose",
                                  env_id=env_id, at=started))
            continue
        times = list(level * rng.lognormal(0.0, sample_sigma, samples))
        # no statistics stored: with none, the validity given here stands (CaseResult.from_row judges it again
        # from the raw samples and the activity only where statistics were stored)
        store.add_result(stored(
            key, run_id=run_id, params=params_of(key), measurement=samples_of(times), env_id=env_id, wall_s=1.0,
            metrics=Metrics(threads=threads, validity=validity, validity_reason=f"{validity} on purpose").as_dict(),
            at=started))
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(
            started_at=started, status=status, finished_at=started + timedelta(minutes=5)))
    return run_id


def levels(n: int, *, step_at: int | None = None, step: float = 1.3, base: float = 1e-3, run_sigma: float = 0.01,
           seed: int = 0) -> list[float]:
    """Per-run levels: `base` with run-to-run noise (lognormal `run_sigma`), times `step` from run index `step_at`."""
    noise = np.random.default_rng(seed).lognormal(0.0, run_sigma, n)
    return [base * float(noise[i]) * (step if step_at is not None and i >= step_at else 1.0) for i in range(n)]


def series_store(store: Store, series: Sequence[float], *, key: str = KEY.format(1), machine: str = "m1",
                 seed: int = 0, start: int = 0, **kwargs: object) -> list[str]:
    """One run per level of `series` (numbered from `start`), the case `key` at that level."""
    return [add_run(store, start + i, {key: level}, seed=seed * 1000 + i, machine=machine, **kwargs)  # type: ignore[arg-type]
            for i, level in enumerate(series)]
