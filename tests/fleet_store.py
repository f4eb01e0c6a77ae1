"""Synthetic multi-machine stores for the matrix, compare and show tests: runs written straight into a temp SQLite
store whose result rows name the machine that ran them (`env_id` per row), as a fleet run stores them.

The store `fleet_store` builds (study `hist`, cases K1 and K2, per-call times lognormal around a level):
- hour 0: a local run on M1 (unlabelled), K1 at 1 ms, K2 at 2 ms;
- hour 1: a fleet run submitted from M1: repetition 0 of K1 and 1 of K2 ran on M1 (1 ms, 2 ms), repetition 1 of K1
  and 0 of K2 on M2 (label `w2`), 30% slower (1.3 ms, 2.6 ms);
- hour 2: a run imported from a bundle of M3 (label `jetson`, aarch64 with a GPU), K1 at 5 ms, K2 at 9 ms;
- hour 5: a newer fleet run, interrupted, with results on M1 and M2: never a column (not complete).

Each result stores its raw samples and the statistics they give (as a worker stores them), so that loading it
recomputes its median and IQR from the samples (`CaseResult.from_row`) and every table has its figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import update

from dlperf.core.result import CaseResult, Metrics
from dlperf.hardware.identity import identity_hash
from dlperf.store import Store
from dlperf.store.schema import runs
from dlperf.timing.measurement import Measurement
from tests.history_store import KEY, STUDY, T0, environment, params_of

K1, K2 = KEY.format(1), KEY.format(2)
M1 = environment("m1")
M2 = environment("m2") | {"machine_label": "w2"}
M3 = environment("m3") | {"machine_label": "jetson", "machine": "aarch64", "cpu_model": "ARMv8 Processor rev 1",
                          "gpus": [{"index": 0, "name": "Orin", "memory_bytes": 16 * 2**30}]}


def env_id(store: Store, fp: dict[str, Any]) -> int:
    return store.environment_id(fp, identity_hash(fp))


def add_rows_run(store: Store, number: int, run_env: dict[str, Any],
                 rows: list[tuple[str, int, dict[str, Any], float]], *, seed: int, status: str = "complete",
                 filters: dict[str, Any] | None = None, samples: int = 60) -> str:
    """A run started `number` hours after T0 in `run_env`, one ok result per (case key, repetition, environment
    of the machine that ran it, level in seconds)."""
    run_env_id = env_id(store, run_env)
    run_id = store.create_run(study=STUDY, variant="quick", study_hash="h", study_path="p", filters=filters or {},
                              settings={}, env_id=run_env_id, n_cases=len(rows),
                              dlperf_version="0.1.0", derived={"dlperf_version": "0.1.0"})
    started = T0 + timedelta(hours=number)
    rng = np.random.default_rng(seed)
    for key, rep, env, level in rows:
        times = list(level * rng.lognormal(0.0, 0.03, samples))
        measurement = {"sample_times_s": times, "sample_iters": [1] * samples}
        stats = Measurement.from_dict(measurement).summary()
        metrics = Metrics(threads=1, validity="valid", validity_reason="valid on purpose",
                          **{k: stats[k] for k in ("n_samples", "total_iters", "block_size", "median_s",
                                                     "iqr_rel")}).as_dict()
        store.add_result(CaseResult.from_row({
            "run_id": run_id, "case_key": key, "repetition": rep, "workload": "ops", "framework": "numpy",
            "device": "cpu", "params": params_of(key), "status": "ok", "reason": None,
            "measurement": measurement, "metrics": metrics,
            "env_id": env_id(store, env), "wall_s": 1.0, "started_at": started, "finished_at": started}))
    with store.engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(
            started_at=started, status=status, finished_at=started + timedelta(minutes=5)))
    return run_id


@dataclass(frozen=True)
class FleetStore:
    local: str
    fleet: str
    bundle: str
    interrupted: str


def fleet_store(store: Store) -> FleetStore:
    """The store the module doc describes."""
    local = add_rows_run(store, 0, M1, [(K1, 0, M1, 1e-3), (K2, 0, M1, 2e-3)], seed=1)
    fleet = add_rows_run(store, 1, M1, [(K1, 0, M1, 1e-3), (K1, 1, M2, 1.3e-3), (K2, 0, M2, 2.6e-3),
                                        (K2, 1, M1, 2e-3)], seed=2, filters={"executor": "dask"})
    bundle = add_rows_run(store, 2, M3, [(K1, 0, M3, 5e-3), (K2, 0, M3, 9e-3)], seed=3)
    interrupted = add_rows_run(store, 5, M1, [(K1, 0, M2, 1e-3), (K2, 0, M1, 1e-3)], seed=4, status="interrupted",
                               filters={"executor": "dask"})
    return FleetStore(local, fleet, bundle, interrupted)
