"""The compiler modes as adapters: `tensorflow-xla` (tf.function(jit_compile=True)) beside `tensorflow`, and
`jax-nojit` (jax.disable_jit) beside `jax`. Each computes what its family's reference mode computes, the mode is
shown to be in effect (XLA's HLO exists, a jitted body runs once per call), and a pair no builder serves in that
mode is `unsupported` with the reason."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from dlperf.frameworks import UnsupportedError, get_framework
from dlperf.frameworks.tensorflow_fw import compile_step
from dlperf.workloads import get_workload

MLP = {"size": "custom", "n": 8, "d_in": 16, "h": 8, "d_out": 4}


def run_steps(workload: str, framework: str, calls: int = 3, **raw) -> np.ndarray:
    """The step's result after `calls` calls of the adapter's prepared step (as the worker times it)."""
    fw = get_framework(framework)
    fw.seed(0)
    w = get_workload(workload)
    built = w.build(fw, "cpu", w.parse(raw))
    fn, sync = fw.prepare(built.fn, "cpu")
    for _ in range(calls):
        fn()
    sync()
    return built.result()


# -- the same numbers ------------------------------------------------------------
@pytest.mark.parametrize(("reference", "mode"), [("tensorflow", "tensorflow-xla"), ("jax", "jax-nojit")])
@pytest.mark.parametrize("variant", ["tensors", "autograd"])
def test_mlp_losses_agree_with_the_reference_mode(reference, mode, variant):
    want = run_steps("mlp", reference, variant=variant, **MLP)
    got = run_steps("mlp", mode, variant=variant, **MLP)
    assert want.shape == got.shape == (3,)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0]  # the steps train: three different losses, not one value repeated


@pytest.mark.parametrize(("reference", "mode", "task"), [
    ("tensorflow", "tensorflow-xla", "train"), ("tensorflow", "tensorflow-xla", "infer"),
    ("jax", "jax-nojit", "infer"),  # jax-nojit trains gpt2-tiny too, but its first step compiles op by op (~15 s)
])
def test_transformer_agrees_with_the_reference_mode(reference, mode, task):
    raw = {"model": "gpt2-tiny", "task": task, "batch": 2, "seq_len": 8}
    want = run_steps("transformer", reference, calls=2, **raw)
    got = run_steps("transformer", mode, calls=2, **raw)
    assert want.shape == got.shape and want.size > 0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("task", ["train", "infer"])
def test_cnn_under_xla_agrees_with_the_graph(task):
    raw = {"model": "lenet5", "task": task, "batch": 4}
    want = run_steps("cnn", "tensorflow", calls=2, **raw)
    got = run_steps("cnn", "tensorflow-xla", calls=2, **raw)
    assert want.shape == got.shape and want.size > 0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_xla_generation_equals_graph_generation():
    raw = {"model": "gpt2-tiny", "task": "generate", "batch": 2, "prompt_len": 4, "new_tokens": 3, "kv_cache": True}
    np.testing.assert_array_equal(run_steps("transformer", "tensorflow-xla", calls=1, **raw),
                                  run_steps("transformer", "tensorflow", calls=1, **raw))


# -- the mode is in effect -----------------------------------------------------------
@pytest.mark.parametrize(("framework", "xla"), [("tensorflow", False), ("tensorflow-xla", True)])
def test_the_builders_step_is_xla_compiled_only_in_the_xla_mode(monkeypatch, framework, xla):
    """Every tf.function the mlp builder makes is XLA's under tensorflow-xla (its HLO exists) and never under
    tensorflow (TensorFlow refuses the IR of a function not marked jit_compile); it is traced in the first call
    (so `first_call_s` holds the trace and XLA's compile) and never again."""
    tf = get_framework(framework).import_module()
    made: list = []
    real = tf.function

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tf, "function", spy)
    fw = get_framework(framework)
    w = get_workload("mlp")
    fn, _ = fw.prepare(w.build(fw, "cpu", w.parse({"variant": "autograd", **MLP})).fn, "cpu")
    assert len(made) == 1 and made[0].experimental_get_tracing_count() == 0
    fn()
    assert made[0].experimental_get_tracing_count() == 1
    fn()
    assert made[0].experimental_get_tracing_count() == 1
    if xla:
        assert "HloModule" in made[0].experimental_get_compiler_ir()(stage="hlo")
    else:
        with pytest.raises(ValueError, match="jit_compile=True"):
            made[0].experimental_get_compiler_ir()


def test_xla_mode_refuses_what_xla_cannot_compile():
    """jit_compile=True is a must: an op XLA has no kernel for fails instead of running outside XLA."""
    tf = get_framework("tensorflow").import_module()
    x = tf.ones((2, 2))

    def body():
        return tf.numpy_function(lambda a: a * 2, [x], tf.float32)

    assert compile_step(get_framework("tensorflow"), body)().shape == (2, 2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="XLA"):
        compile_step(get_framework("tensorflow-xla"), body)()
    assert compile_step(get_framework("tensorflow-eager"), body) is body


def test_xla_generation_compiles_prefill_and_decode():
    tf = get_framework("tensorflow-xla").import_module()
    from dlperf.models.transformer import get_config, init_weights
    from dlperf.models.transformer import tensorflow_model as tm

    cfg = get_config("gpt2-tiny")
    model = tm.build(cfg, init_weights(cfg, 0), device="cpu")
    gen = tm.Generator(model, 1, 4, 2, kv_cache=True, graph=True, jit_compile=True)
    prompt = tf.constant([[1, 2, 3, 4]], tf.int32)
    assert "HloModule" in gen._prefill.experimental_get_compiler_ir(prompt)(stage="hlo")
    plain = tm.Generator(model, 1, 4, 2, kv_cache=True, graph=True)
    with pytest.raises(ValueError, match="jit_compile=True"):
        plain._prefill.experimental_get_compiler_ir(prompt)


@pytest.mark.parametrize(("framework", "bodies", "compiled"), [("jax", 1, 1), ("jax-nojit", 3, 0)])
def test_nojit_runs_the_jitted_body_every_call_and_compiles_nothing(framework, bodies, compiled):
    """Under jax a jitted function is traced once and compiled once; under jax-nojit's prepared step its Python
    body runs on every call and nothing enters its compile cache."""
    fw = get_framework(framework)
    jax = fw.import_module()
    runs = [0]

    @jax.jit
    def f(a):
        runs[0] += 1
        return a * 2.0

    a = jax.numpy.ones(4)
    fn, sync = fw.prepare(lambda: f(a), "cpu")
    for _ in range(3):
        fn()
    sync()
    assert runs[0] == bodies and f._cache_size() == compiled
    assert fw.info()["mode"] == ("jit" if framework == "jax" else "no-jit (jax.disable_jit)")


def test_nojit_predict_runs_without_jit():
    """A Step's predict runs outside `prepare`: the jax builder enters the adapter's mode itself (jit is off
    inside the call under jax-nojit, on under jax, and on again after it)."""
    jax = get_framework("jax").import_module()
    w = get_workload("transformer")
    p = w.parse({"model": "gpt2-tiny", "task": "infer", "batch": 2, "seq_len": 8})
    seen: dict[str, bool] = {}
    for name in ("jax", "jax-nojit"):
        fw = get_framework(name)
        mode = fw.mode

        @contextlib.contextmanager
        def spying_mode(mode=mode, name=name):
            with mode():
                seen[name] = bool(jax.config.jax_disable_jit)
                yield

        fw.mode = spying_mode  # type: ignore[method-assign]
        step = w.build(fw, "cpu", p)
        assert step.predict is not None
        out = step.predict(1)
        assert out.shape[0] == 1 and np.isfinite(out).all()
    assert seen == {"jax": False, "jax-nojit": True}
    assert not jax.config.jax_disable_jit


# -- what no builder runs in a mode ------------------------------------------------------
@pytest.mark.parametrize(("workload", "framework", "raw"), [
    ("peaks", "tensorflow-xla", {"kind": "copy", "size_mb": 1}),
    ("peaks", "jax-nojit", {"kind": "copy", "size_mb": 1}),
    ("cnn", "jax-nojit", {"model": "lenet5", "batch": 2}),
])
def test_a_pair_without_a_builder_in_that_mode_is_unsupported(workload, framework, raw):
    w = get_workload(workload)
    with pytest.raises(UnsupportedError, match=f"workload '{workload}' has no {framework} implementation"):
        w.build(get_framework(framework), "cpu", w.parse(raw))
