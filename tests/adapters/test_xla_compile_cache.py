"""The XLA modes' cold and warm compile (`workloads.xla_compile`): JAX's persistent cache really serves the warm
process (its own cache-hit events, and no write; that the warm first call is faster than the cold one is a speed
target, judged by a ratio in benchmarks/xla_warm_compile.py, not by a timed test), two cold runs have
folders of their own, jax-nojit writes no persistent cache and says why it has no warm compile, and TensorFlow's
XLA cache (TF_XLA_FLAGS) is written by the cold process and read, not written, by the warm one.

Every cache folder is under this module's own temporary folder (`tempfile.tempdir`), never the user's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlperf.frameworks import get_framework
from dlperf.frameworks import tensorflow_fw as tfw
from dlperf.workloads import get_workload, xla_compile
from tests.conftest import tempdir_as_default

MLP = {"variant": "autograd", "size": "small"}


def first_call(framework: str, raw: dict) -> tuple[object, float, object]:
    """(the built step, its first call's seconds with the sync, the adapter), built as the worker builds it."""
    fw = get_framework(framework)
    fw.seed(0)
    w = get_workload("mlp")
    step = w.build(fw, "cpu", w.parse(raw))
    fn, sync = fw.prepare(step.fn, "cpu")
    start = time.perf_counter()
    fn()
    sync()
    return step, time.perf_counter() - start, fw


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's temporary folder as the one cache folders are made in."""
    yield from tempdir_as_default(tmp_path_factory, "caches")


@pytest.fixture(scope="module")
def jax_cold_and_warm(scratch: Path):
    """One jax case on the small MLP: its first call (cold, on a new folder) and its record (the warm process)."""
    step, cold_s, fw = first_call("jax", MLP)
    record = get_workload("mlp").extra_metrics(get_workload("mlp").parse(MLP), step)["compile"]
    yield step, cold_s, record
    fw.use_compile_cache(None)  # type: ignore[attr-defined]


def test_jax_warm_compile_hits_the_cache_and_writes_nothing(jax_cold_and_warm, scratch):
    step, cold_s, record = jax_cold_and_warm
    assert Path(record["cache_dir"]).is_relative_to(scratch)
    assert record["cold_cache_files_before"] == 0 and record["cold_cache_files_after"] >= 1
    assert record["cold_counters"]["writes"] >= 1 and record["cold_counters"]["hits"] == 0
    assert "warm_error" not in record, record.get("warm_error")
    assert record["warm_cache_files_before"] == record["cold_cache_files_after"]
    assert record["warm_counters"]["hits"] >= 1 and record["warm_counters"]["writes"] == 0
    assert record["warm_hit"] is True
    assert 0 < record["warm_s"] < 60 and cold_s > 0  # timed, in seconds (how they compare: the benchmark)


def test_two_cold_runs_do_not_share_a_folder(jax_cold_and_warm):
    """A second case gets a new, empty folder, and its first call compiles and writes again (no hit)."""
    first = jax_cold_and_warm[0]
    step, _, fw = first_call("jax", MLP)
    try:
        assert step.cache.folder != first.cache.folder
        assert step.cache.files_at_start == 0
        seen = xla_compile.counters(fw, step.cache)
        assert seen["writes"] >= 1 and seen["hits"] == 0
    finally:
        fw.use_compile_cache(None)  # type: ignore[attr-defined]


def test_nojit_writes_no_persistent_cache_and_says_why_it_has_no_warm_compile(scratch):
    jax = get_framework("jax").import_module()
    fw0 = get_framework("jax")
    fw0.use_compile_cache(scratch / "not-for-nojit")  # type: ignore[attr-defined]  # what an earlier case left set
    fw0.seed(0)  # the seed's key is made (and its jit compiled, here into that folder) before a case is built,
    # as the worker does; alone, without the module's earlier tests, this test counted those writes as the step's
    before = fw0.cache_events()  # type: ignore[attr-defined]
    step, _, fw = first_call("jax-nojit", MLP)
    record = get_workload("mlp").extra_metrics(get_workload("mlp").parse(MLP), step)["compile"]
    assert jax.config.jax_compilation_cache_dir is None
    assert fw.cache_events()["writes"] == before["writes"]  # type: ignore[attr-defined]
    assert record["cache"] == "none" and "no warm compile" in record["no_warm"]
    assert "warm_s" not in record and "cold_counters" not in record


def test_other_frameworks_record_no_compile():
    w = get_workload("mlp")
    step, _, _ = first_call("numpy", {"variant": "tensors", "size": "custom", "n": 4, "d_in": 4, "h": 4,
                                      "d_out": 2})
    assert w.extra_metrics(w.parse(MLP), step) == {}


def test_the_tf_xla_cache_flag_is_read_from_tf_xla_flags():
    assert tfw.persistent_dir(f"--tf_xla_auto_jit=2 {tfw.PERSISTENT_FLAG}=/x/y") == "/x/y"
    assert tfw.persistent_dir("--tf_xla_auto_jit=2") is None
    assert tfw.persistent_dir(f"{tfw.PERSISTENT_FLAG}=") is None


def test_tf_started_before_the_xla_adapter_has_no_cache_and_says_why(monkeypatch):
    get_framework("tensorflow").import_module()
    monkeypatch.setattr(tfw, "_XLA_CACHE", [])
    step, _, _ = first_call("tensorflow-xla", {"variant": "tensors", "size": "custom", "n": 4, "d_in": 4, "h": 4,
                                               "d_out": 2})
    record = get_workload("mlp").extra_metrics(get_workload("mlp").parse(MLP), step)["compile"]
    assert record["cache"] == "none" and "before the tensorflow-xla adapter" in record["no_warm"]


COLD_TF = """
import json, os, sys, time
from dlperf.frameworks import get_framework
from dlperf.workloads import get_workload
fw = get_framework("tensorflow-xla"); fw.import_module(); fw.seed(0)
w = get_workload("mlp"); p = w.parse(json.loads(sys.argv[1]))
step = w.build(fw, "cpu", p)
fn, sync = fw.prepare(step.fn, "cpu")
t = time.perf_counter(); fn(); sync(); cold_s = time.perf_counter() - t
print(json.dumps({"cold_s": cold_s, "env": os.environ.get("TF_XLA_FLAGS"), **w.extra_metrics(p, step)}))
"""


def test_tensorflow_xla_cold_writes_its_cache_and_the_warm_process_reads_it(tmp_path):
    """In a fresh process (TensorFlow reads TF_XLA_FLAGS once): the adapter's new folder, the flag not left in
    the environment for the workers it would start, one executable written cold, none warm."""
    done = subprocess.run([sys.executable, "-c", COLD_TF, json.dumps(MLP)], capture_output=True, text=True,
                          timeout=300, env={**_env(), "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    record = out["compile"]
    assert out["env"] is None
    assert Path(record["cache_dir"]).is_relative_to(tmp_path)
    assert record["cold_cache_files_before"] == 0 and record["cold_counters"]["files_written"] >= 1
    assert "warm_error" not in record, record.get("warm_error")
    assert record["warm_cache_files_before"] == record["cold_cache_files_after"] >= 1
    assert record["warm_counters"] == {"files_written": 0} and record["warm_hit"] is True


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
