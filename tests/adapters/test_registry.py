"""Every registered adapter, and the workload x framework matrix found by the family rule.

Parametrised over `frameworks.REGISTRY`, so a new adapter is tested without
editing a list. The matrix is asserted as data: a builder module that adds or
drops a (workload, framework) pair changes it here, on purpose.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import subprocess
import sys

import pytest

from dlperf.frameworks import REGISTRY, Framework, UnsupportedError, get_framework
from dlperf.frameworks.base import registry
from dlperf.models import build as build_model
from dlperf.models import model_families
from dlperf.workloads import REGISTRY as WORKLOADS
from dlperf.workloads import get_workload

#: Workload -> the frameworks that run it (what `dlperf list` shows).
MATRIX: dict[str, list[str]] = {
    "backends": ["nn-cuda", "nn-cuda-cublas", "nn-sequential", "nn-vectorized", "torch"],
    "cnn": ["caffe", "onnxruntime", "openvino", "tensorflow", "tensorflow-eager", "tensorflow-xla", "torch"],
    "collectives": ["torch"],
    "ddp": ["torch"],
    "faults": ["numpy"],
    "mlp": ["jax", "jax-nojit", "nn-cuda", "nn-cuda-cublas", "nn-sequential", "nn-vectorized", "numpy", "pytensor",
            "tensorflow", "tensorflow-eager", "tensorflow-xla", "theano", "torch"],
    "ops": ["cupy", "jax", "jax-nojit", "nn-cuda", "nn-cuda-cublas", "nn-sequential", "nn-vectorized", "numpy",
            "onnxruntime", "openvino", "pytensor", "tensorflow", "tensorflow-eager", "tensorflow-xla", "theano",
            "torch"],
    "peaks": ["jax", "numpy", "tensorflow", "torch"],
    "transformer": ["jax", "jax-nojit", "numpy", "onnxruntime", "openvino", "tensorflow", "tensorflow-eager",
                    "tensorflow-xla", "torch"],
    "model": ["jax", "jax-nojit", "onnxruntime", "openvino", "tensorflow", "tensorflow-eager", "tensorflow-xla",
              "torch"],  # a study names tensorflow or jax with a variant; a mode adapter runs its own variant only
}
#: `serve` has no builder modules of its own: it serves the inference steps of these workloads' builders.
SERVED = ("cnn", "transformer")
MATRIX["serve"] = sorted({f for w in SERVED for f in MATRIX[w]})
PAIRS = [(w, f) for w, fws in MATRIX.items() for f in fws if w != "serve"]


# -- every adapter ---------------------------------------------------------
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_adapter_declares_name_and_family(name):
    cls = REGISTRY[name]
    assert cls.name == name
    assert cls.family and cls.family.isidentifier(), f"{name}: the family names builder modules `<family>_<workload>`"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_adapter_presence_and_version_import_nothing(name):
    """available() and version read metadata only: the framework's module is not imported (in a fresh process)."""
    code = (
        "import sys\n"
        "from dlperf.frameworks import get_framework\n"
        f"fw = get_framework({name!r})\n"
        "before = set(sys.modules)\n"
        "ok, version = fw.available(), fw.version\n"
        "assert isinstance(ok, bool) and (version is None or isinstance(version, str)), (ok, version)\n"
        "new = sorted(m for m in set(sys.modules) - before if m == fw.module or m.startswith(fw.module + '.'))\n"
        "assert not new, new\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_registering_an_adapter_without_family_fails_loudly():
    class NoFamily(Framework):
        name = "no-family"
        module = "json"

    with pytest.raises(TypeError, match="NoFamily must set both `name` and `family`"):
        registry(NoFamily)
    with pytest.raises(TypeError, match="'numpy' is registered twice"):
        registry(REGISTRY["numpy"], REGISTRY["numpy"])


# -- the matrix --------------------------------------------------------------
def test_matrix_is_exactly_the_supported_pairs():
    assert {name: cls().frameworks() for name, cls in WORKLOADS.items()} == MATRIX


def test_exclusions_are_needed():
    """An exclusion names a registered framework that the family rule alone would add (none go stale)."""
    for name, cls in WORKLOADS.items():
        families = cls.families()
        for fw in cls.excluded_frameworks:
            assert fw in REGISTRY and REGISTRY[fw].family in families, (name, fw)


@pytest.mark.parametrize(("workload", "framework"), PAIRS)
def test_builder_module_resolves(workload, framework):
    """The builder module is found by the rule; imported (and its `build` checked) only where the framework is
    installed, so CuPy, Caffe and CUDA are never imported here."""
    w = get_workload(workload)
    fw = get_framework(framework)
    module = w.builder_module(fw.family)
    assert module == f"dlperf.workloads.{workload}.{fw.family}_{workload}"
    assert importlib.util.find_spec(module) is not None
    if fw.available():
        build = importlib.import_module(module).build
        assert list(inspect.signature(build).parameters) == ["fw", "device", "p"]


def test_a_framework_outside_the_matrix_is_unsupported():
    w = get_workload("peaks")
    with pytest.raises(UnsupportedError, match=r"workload 'peaks' has no tensorflow-eager implementation "
                                               r"\(it has: jax, numpy, tensorflow, torch\)"):
        w.build(get_framework("tensorflow-eager"), "cpu", w.parse({"kind": "copy", "size_mb": 1}))


# -- optional hooks, declared on the base class ---------------------------------
def test_optional_hooks_have_defaults():
    assert {name: cls.memory_axis for name, cls in WORKLOADS.items()} == {
        "backends": None, "cnn": "batch", "faults": None, "mlp": None, "ops": None, "peaks": None,
        "transformer": "batch", "serve": None, "ddp": None, "collectives": None, "model": "batch"}
    ops = get_workload("ops")
    assert ops.steps_per_epoch(ops.parse({"op": "add", "size_mb": 1})) is None
    assert ops.per_call_timing(ops.parse({"op": "add", "size_mb": 1})) is False


def test_models_are_built_by_family():
    assert model_families() == {"torch", "tensorflow"}
    with pytest.raises(ValueError, match="models are built for tensorflow or torch, not 'caffe'"):
        build_model("lenet5", "caffe")
