"""The environment fingerprint: content, stable hash, diff; compare never merges environments silently."""

from __future__ import annotations

from datetime import UTC, datetime

import psutil

from dlperf.hardware.fingerprint import diff, fingerprint, fingerprint_hash, host_fingerprint
from dlperf.store import Store
from tests.conftest import run_cli


def test_host_fingerprint_has_the_identity_fields():
    fp = host_fingerprint(threads=2)
    for key in ("cpu_model", "cpu_physical_cores", "cpu_logical_cores", "threads", "ram_bytes", "os", "kernel",
                "python", "hostname_sha256", "gpus", "dlperf_version", "dlperf_git_commit"):
        assert key in fp
    assert fp["threads"] == 2
    assert fp["cpu_logical_cores"] == psutil.cpu_count()
    assert fp["ram_bytes"] == psutil.virtual_memory().total
    import socket

    assert socket.gethostname() not in str(fp)  # only the hash of the host name is kept


def test_framework_part_names_versions_and_blas():
    fp = fingerprint(["numpy", "torch"], threads=1)
    assert set(fp["frameworks"]) == {"numpy", "torch"}
    assert fp["frameworks"]["torch"]["version"].startswith("2.")
    assert fp["frameworks"]["numpy"].get("blas")


def test_hash_is_stable_and_sensitive():
    a = {"cpu_model": "x", "threads": 2, "frameworks": {"torch": {"version": "2.13.0"}}}
    assert fingerprint_hash(a) == fingerprint_hash(dict(reversed(list(a.items()))))
    b = {**a, "frameworks": {"torch": {"version": "2.14.0"}}}
    assert fingerprint_hash(a) != fingerprint_hash(b)
    assert diff(a, b) == [("frameworks.torch.version", "2.13.0", "2.14.0")]


def test_compare_across_environments_says_so(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    now = datetime.now(UTC)
    run_ids = []
    for threads in (1, 2):
        fp = {"cpu_model": "x", "threads": threads}
        env_id = store.environment_id(fp, fingerprint_hash(fp))
        run_id = store.create_run(study=f"s{threads}", variant="full", study_hash="h", study_path="p", filters={},
                                  settings={}, env_id=env_id, n_cases=1, dlperf_version="0")
        store.add_result({"run_id": run_id, "case_key": "k", "repetition": 0, "workload": "ops",
                          "framework": "numpy", "device": "cpu", "params": {}, "status": "ok", "reason": None,
                          "measurement": {"sample_times_s": [1e-3 * (1 + i / 100) for i in range(10)],
                                          "sample_iters": [1] * 10},
                          "metrics": {}, "env_id": env_id, "wall_s": 1.0, "started_at": now, "finished_at": now})
        run_ids.append(run_id)
    res = run_cli("compare", *run_ids, db=db)
    assert res.returncode == 0, res.stderr
    assert "the two runs come from different environments" in res.stdout
    assert "threads: 1 -> 2" in res.stdout
