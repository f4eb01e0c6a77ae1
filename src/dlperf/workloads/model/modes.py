"""Which model cases TensorFlow and JAX run, and in which adapter: the model workload's variants on those families
are their adapters' modes (`variants.MODE_ADAPTERS`), and only dlperf's own models have a twin there (`twin`).

Imports nothing of the model package's `__init__` (which imports this module, for `Model.build`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from dlperf.frameworks import REGISTRY, Framework, UnsupportedError, get_framework
from dlperf.models import MODELS
from dlperf.models.transformer import PRESETS
from dlperf.sources.dlperf_source import MLPS, PREFIX
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.variants import MODE_ADAPTERS, MODE_ONLY, adapter_name
from dlperf.workloads.xla_compile import XlaStep

#: The families whose variants are modes, built by `twin`.
FAMILIES = ("tensorflow", "jax")


class Case(Protocol):
    """What `check` reads of a case's params (`ModelParams`), read only."""

    @property
    def source(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def precision(self) -> str: ...
    @property
    def input(self) -> list[str] | None: ...
    @property
    def inputs_fn(self) -> str | None: ...


@dataclass(frozen=True)
class XlaModelStep(XlaStep):
    """A TensorFlow or JAX model step of an XLA mode: an `XlaStep` (its compiler cache and the case a warm compile
    rebuilds, read by `xla_compile.record`) with the model's figures, as `ModelStep.info`."""

    info: ModelInfo = field(default_factory=lambda: ModelInfo())


def kind(source: str) -> str | None:
    """The twin's kind of a source: cnn, mlp, transformer, or None (not one of dlperf's own models)."""
    if not source.startswith(PREFIX):
        return None
    name = source[len(PREFIX):]
    return "cnn" if name in MODELS else "mlp" if name in MLPS else "transformer" if name in PRESETS else None


def check(family: str, p: Case) -> str:
    """The twin's kind of the case, or UnsupportedError saying why `family` does not run it."""
    found = kind(p.source)
    if found is None:
        raise UnsupportedError(f"{p.source}: {family} runs dlperf's own models only (dlperf:NAME, built by the "
                               "shipped workloads with the torch weights); a user's torch module, an ONNX file or "
                               f"a Hugging Face model has no {family} build")
    if found == "cnn" and family == "jax":
        raise UnsupportedError(f"{p.source}: dlperf has no JAX CNN (the cnn workload runs torch, tensorflow and the "
                               "runtimes)")
    if p.precision != "fp32":
        raise UnsupportedError(f"{family} runs dlperf's models at fp32 here, not {p.precision}: dlperf has no "
                               f"{family} int8 quantizer, and its mixed precision is the transformer workload's")
    if p.input or p.inputs_fn:
        raise UnsupportedError(f"{family} runs a dlperf model on its own example inputs, not --input/--inputs")
    if p.task == "train" and found == "mlp":
        raise UnsupportedError(f"{p.source}: study 000's net trains in {family} in the mlp workload (its own data, "
                               "squared error, lr 1e-6: study compilers_xla), not on the model workload's batch")
    if p.task == "generate" and found != "transformer":
        raise UnsupportedError(f"{p.source} is not a causal language model: it does not generate")
    return found


def refusal(framework: str, p: Case) -> str | None:
    """Why `framework` cannot run the case `p` at all (a source with no twin, a precision it lacks...), or None:
    what `bench` and `maxbatch` say before a store is opened, rather than a run of `unsupported` cases."""
    cls = REGISTRY.get(framework)
    if cls is None or cls.family not in FAMILIES:
        return None
    if framework in MODE_ONLY:
        return _not_as_framework(framework, cls.family)
    try:
        check(cls.family, p)
    except UnsupportedError as exc:
        return str(exc)
    return None


def _not_as_framework(name: str, family: str) -> str:
    """Why a mode adapter (tensorflow-xla, jax-nojit...) named as the framework runs no model case."""
    modes = ", ".join(f"{v} ({a})" for (f, v), a in MODE_ADAPTERS.items() if f == family)
    return (f"the model workload runs {family}'s modes as variants of framework {family} ({modes}), not as "
            f"framework {name}: --framework {family} --variant ...")


def mode_adapter(fw: Framework, variant: str) -> Framework:
    """The adapter of the variant's mode: `fw` where it is that one, else a new one seeded as `fw` (a direct
    build with the family's plain adapter); UnsupportedError for a mode adapter named with another variant."""
    want = adapter_name(fw.name, fw.family, variant)
    if fw.name == want:
        return fw
    if fw.name in MODE_ONLY:
        raise UnsupportedError(_not_as_framework(fw.name, fw.family))
    mode = get_framework(want)
    seed = fw.seed_value()
    if seed is not None:
        mode.seed(seed)
    return mode


def in_mode(mode: Framework, fn: Callable[[], object]) -> Callable[[], object]:
    """`fn` called inside the JAX adapter's mode (`jax.disable_jit()` for jax-nojit)."""

    def call() -> object:
        with mode.mode():  # type: ignore[attr-defined]
            return fn()

    return call
