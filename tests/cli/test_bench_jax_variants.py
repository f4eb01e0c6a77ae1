"""`dlperf bench dlperf:mlp-small --framework jax --variant no-jit --variant jit` end to end: each case through a
real worker, which runs it with its variant's mode adapter (`Model.adapter`: eager/no-jit on `jax-nojit`, jit on
`jax`). Both paths compute the torch reference's function and pass the gate; jit records its cold compile on an
empty persistent cache and a warm one that hits it; the report prints the speed-up line for jit against eager.
tests/workloads/test_model_tf_jax.py checks the builds in-process; this checks the worker's choice of adapter."""

from __future__ import annotations

import importlib.util
import json
import sqlite3

import pytest

from tests.cli.conftest import variant_of
from tests.conftest import run_cli


def test_jax_no_jit_and_jit_run_in_their_modes_and_pass_the_gate(tmp_path) -> None:
    # looked up, not imported: the test uses JAX only in its workers, and every test process collects every file
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the jax extra is not installed")
    db = tmp_path / "j.db"
    res = run_cli("bench", "dlperf:mlp-small", "--framework", "jax", "--variant", "no-jit", "--variant", "jit",
                  "--batch", "8", "--budget", "0.2", "--db", str(db), timeout=600,
                  env={"DLPERF_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    with sqlite3.connect(db) as con:
        rows = {variant_of(key): (status, reason, json.loads(metrics or "{}")) for key, status, reason, metrics in
                con.execute("select case_key, status, reason, metrics from results")}
    assert set(rows) == {"eager", "jit"}  # no-jit is JAX's eager: one case, not two
    for variant, (status, reason, metrics) in rows.items():
        assert status == "ok", (variant, reason)
        assert metrics["correctness"]["status"] == "pass", metrics["correctness"]
    jit = rows["jit"][2]["compile"]
    assert jit["mode"] == "jax" and jit["cold_cache_files_before"] == 0 and jit["warm_hit"] is True, jit
    assert "compile" not in rows["eager"][2] or rows["eager"][2]["compile"]["mode"] == "jax-nojit"
    assert "jit" in res.stdout and "pass" in res.stdout
