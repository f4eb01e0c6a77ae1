"""A bundle's content checked before anything is written: every field an import writes is there and typed
as the store wants it."""

from __future__ import annotations

from typing import Any

from dlperf.core.result import CaseResult
from dlperf.core.status import check_run_status
from dlperf.store.bundle.base import RESULT_FIELDS, RUN_FIELDS, when


def check_shape(content: dict[str, Any]) -> None:
    """Every field an import writes is there and typed as the store wants it (a checksum only says that the
    writer's content is unchanged, not that the writer was dlperf)."""
    run = content["run"]
    missing = [k for k in (*RUN_FIELDS, "env_fingerprint_hash") if k not in run]
    if missing:
        raise KeyError(f"the run lacks {', '.join(missing)}")
    check_run_status(run["status"])
    when(run["started_at"], "the run's started_at")
    when(run["finished_at"], "the run's finished_at")
    hashes = {e["fingerprint_hash"] for e in content["environments"]}
    for e in content["environments"]:
        if not isinstance(e["fingerprint_hash"], str) or not isinstance(e["data"], dict):
            raise TypeError("an environment's fingerprint_hash or data has the wrong type")
        when(e["created_at"], "an environment's created_at")
    if run["env_fingerprint_hash"] not in hashes:
        raise KeyError("the run's environment is not among the bundle's environments")
    seen: set[tuple[str, int]] = set()
    for r in content["results"]:
        if r["env_fingerprint_hash"] not in hashes:
            raise KeyError(f"the environment of result {r['case_key']!r} is not among the bundle's environments")
        CaseResult.model_validate({**{k: r[k] for k in RESULT_FIELDS}, "run_id": run["id"], "env_id": 0})
        key = (r["case_key"], r["repetition"])
        if key in seen:
            raise ValueError(f"result {key[0]!r} repetition {key[1]} appears twice")
        seen.add(key)
