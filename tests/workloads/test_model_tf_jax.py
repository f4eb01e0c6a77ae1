"""dlperf:mlp-small on TensorFlow's xla and JAX's jit and eager (no-jit) variants, built as the worker builds them
(the adapter `Model.adapter` picks): each computes the torch reference's function (the torch weights ported) and
passes the gate, and its cold and warm compile are recorded with the cache hit; a path whose weights are not the
torch module's fails the gate. TensorFlow's case runs in a fresh process (TensorFlow reads its XLA cache folder
once, when it starts). Every cache folder is under this module's temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from dlperf.frameworks import get_framework
from dlperf.workloads import get_workload
from dlperf.workloads.model import twin
from tests.conftest import tempdir_as_default

MODEL = get_workload("model")
MLP = {"source": "dlperf:mlp-small", "task": "infer", "batch": 8}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's temporary folder as the one cache folders are made in."""
    yield from tempdir_as_default(tmp_path_factory, "caches")


def run_case(framework: str, raw: dict) -> dict:
    """One case built and called as the worker does (its adapter from `Model.adapter`); its extra metrics."""
    fw = get_framework(MODEL.adapter(framework, raw))
    fw.seed(0)
    p = MODEL.parse(raw)
    step = MODEL.build(fw, "cpu", p)
    fn, sync = fw.prepare(step.fn, "cpu")
    for _ in range(2):
        fn()
        sync()
    out = MODEL.extra_metrics(p, step)
    if fw.name == "jax":
        fw.use_compile_cache(None)  # type: ignore[attr-defined]
    return out


def counted_dots(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per call of jax.numpy.dot from now on (the net's forward makes two per run of its Python)."""
    import jax

    calls: list[int] = []
    dot = jax.numpy.dot

    def counted(*args: object, **kw: object) -> object:
        calls.append(1)
        return dot(*args, **kw)

    monkeypatch.setattr(jax.numpy, "dot", counted)
    return calls


@pytest.fixture(scope="module")
def jit_case(scratch: Path) -> tuple[int, dict]:
    """(calls of jax.numpy.dot, extra metrics) of the jit case run once as the worker runs it: its gate, its compile
    record and its tracing are checked by two tests below, which ran the same case twice before (a cold and a warm
    XLA compile each time); counting the products calls the real jax.numpy.dot, so the case computes the same."""
    with pytest.MonkeyPatch.context() as mp:
        calls = counted_dots(mp)
        out = run_case("jax", MLP | {"variant": "jit"})
    return len(calls), out


def test_jax_jit_passes_the_gate_and_its_warm_compile_hits_the_cache(jit_case: tuple[int, dict],
                                                                     scratch: Path) -> None:
    _, out = jit_case
    assert out["correctness"]["status"] == "pass" and out["correctness"]["rel_err"] < 1e-5
    record = out["compile"]
    assert record["mode"] == "jax" and Path(record["cache_dir"]).is_relative_to(scratch)
    assert record["cold_counters"]["writes"] >= 1 and record["cold_cache_files_before"] == 0
    assert "warm_error" not in record, record.get("warm_error")
    assert record["warm_counters"]["hits"] >= 1 and record["warm_hit"] is True and record["warm_s"] > 0
    assert out["flops_per_call"] == 2 * 8 * (1000 * 1500 + 1500 * 10) and out["param_count"] == 1_515_000


@pytest.mark.parametrize(("variant", "traced"), [("no-jit", 2), ("jit", 1)])
def test_jax_no_jit_runs_op_by_op_and_passes_the_gate(variant: str, traced: int, monkeypatch: pytest.MonkeyPatch,
                                                      request: pytest.FixtureRequest, scratch: Path) -> None:
    """On the worker's adapter (`jax-nojit` for no-jit): the forward's Python runs at each of run_case's two
    calls, where jit's is traced once (the jit case is the module's one run of it, `jit_case`)."""
    if variant == "jit":
        n_calls, out = request.getfixturevalue("jit_case")
    else:
        calls = counted_dots(monkeypatch)
        out = run_case("jax", MLP | {"variant": variant})
        n_calls = len(calls)
    assert n_calls == 2 * traced
    assert out["correctness"]["status"] == "pass"
    if variant == "no-jit":
        assert out["compile"]["mode"] == "jax-nojit" and "no_warm" in out["compile"]


@pytest.mark.parametrize(("variant", "traced"), [("eager", 3), ("jit", 1)])
def test_a_direct_build_on_the_plain_jax_adapter_runs_eager_op_by_op(variant: str, traced: int,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     scratch: Path) -> None:
    """Built by `Model.build` with the `jax` adapter (no worker to pick `jax-nojit`): eager's step enters
    jax.disable_jit() itself, so the forward's Python runs at every call; jit's is traced once."""
    calls = counted_dots(monkeypatch)
    fw = get_framework("jax")
    fw.seed(0)
    step = MODEL.build(fw, "cpu", MODEL.parse(MLP | {"variant": variant}))
    fn, sync = fw.prepare(step.fn, "cpu")
    for _ in range(3):
        fn()
        sync()
    fw.use_compile_cache(None)  # type: ignore[attr-defined]
    assert len(calls) == 2 * traced  # two products per forward
    assert step.info["gate"]()["status"] == "pass"


def test_weights_not_the_torch_modules_fail_the_gate(monkeypatch: pytest.MonkeyPatch, scratch: Path) -> None:
    ported = twin.mlp_weights

    def perturbed(ref: twin.Reference) -> tuple[np.ndarray, np.ndarray]:
        w1, w2 = ported(ref)
        return w1 * 1.01, w2  # 1% off: another function than the reference's
    monkeypatch.setattr(twin, "mlp_weights", perturbed)
    # the no-jit case: the same builder ports the weights (twin.mlp_weights) and the same gate judges its output;
    # jit would add only its cold and warm XLA compiles, which the tests above check
    verdict = run_case("jax", MLP | {"variant": "no-jit"})["correctness"]
    assert verdict["status"] == "fail" and verdict["rel_err"] > 1e-3 and "x scale" in verdict["reason"]


TF_CASES = """
import json, sys
from dlperf.frameworks import get_framework
from dlperf.workloads import get_workload
w = get_workload("model")
for framework, raw in json.loads(sys.argv[1]):
    fw = get_framework(w.adapter(framework, raw)); fw.import_module(); fw.seed(0)
    p = w.parse(raw)
    step = w.build(fw, "cpu", p)
    fn, sync = fw.prepare(step.fn, "cpu")
    fn(); sync(); fn(); sync()
    out = w.extra_metrics(p, step)
    print(json.dumps({"adapter": fw.name, **{k: out.get(k) for k in ("correctness", "compile", "flops_per_call")}}))
"""


def test_tensorflow_xla_and_graph_pass_the_gate_and_xla_records_its_compile(tmp_path: Path) -> None:
    cases = [["tensorflow", MLP | {"variant": "xla"}],
             ["tensorflow", {"source": "dlperf:lenet5", "task": "infer", "batch": 2, "variant": "graph"}]]
    env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"} | {"TMPDIR": str(tmp_path),
                                                                          "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", TF_CASES, json.dumps(cases)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    xla, graph = (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    assert xla["adapter"] == "tensorflow-xla" and xla["correctness"]["status"] == "pass"
    record = xla["compile"]
    assert Path(record["cache_dir"]).is_relative_to(tmp_path) and record["cold_counters"]["files_written"] >= 1
    assert "warm_error" not in record, record.get("warm_error")
    assert record["warm_counters"] == {"files_written": 0} and record["warm_hit"] is True and record["warm_s"] > 0
    assert graph["adapter"] == "tensorflow" and graph["correctness"]["status"] == "pass"
    assert graph["compile"] is None and graph["flops_per_call"] > 0  # graph mode: no XLA cache to record


@pytest.mark.parametrize("raw", [MLP | {"batch": 2}, {"source": "dlperf:lenet5", "task": "infer", "batch": 2},
                                 {"source": "dlperf:lenet5", "task": "train", "batch": 2}])
def test_tensorflow_twins_keep_fp32_products_in_fp32_on_a_gpu(raw: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorFlow runs float32 matmuls and convolutions in TF32 on an Ampere or later GPU by default (about 1e-3
    of the scale off), which the fp32 gate (1e-4) would fail: every TensorFlow twin call on a GPU runs with TF32
    off, as the transformer twin's (`tensorflow_transformer.no_tf32`), and leaves the setting as it found it.
    Built for cuda:0 on any machine (TensorFlow places the ops on the CPU where no GPU is), the setting read by
    each call of the mode's compiled function."""
    from dlperf.frameworks import tensorflow_fw
    from dlperf.workloads.cnn import tensorflow_cnn
    from dlperf.workloads.model import tensorflow_model

    fw = get_framework("tensorflow-eager")
    tf = fw.import_module()
    fw.seed(0)
    seen: list[bool] = []

    def recording(mode: object, fn: Callable[..., object], **kw: object) -> Callable[..., object]:
        compiled = tensorflow_fw.compile_step(mode, fn, **kw)  # type: ignore[arg-type]

        def call(*args: object) -> object:
            seen.append(tf.config.experimental.tensor_float_32_execution_enabled())
            return compiled(*args)

        return call

    monkeypatch.setattr(tensorflow_model, "compile_step", recording)
    monkeypatch.setattr(tensorflow_cnn, "compile_step", recording)
    assert tf.config.experimental.tensor_float_32_execution_enabled()  # TensorFlow's default
    step = MODEL.build(fw, "cuda:0", MODEL.parse(raw))
    step.fn()
    step.fn()
    if step.predict is not None:
        step.predict(1)
    assert seen and not any(seen), seen
    assert tf.config.experimental.tensor_float_32_execution_enabled()  # restored after each call
