"""The workload interface: a parameter schema, a cost model, and one builder module per framework family.

The builder of workload `w` for a framework is found by one rule: the module
`dlperf.workloads.<w>.<family>_<w>` (family: the adapter's `Framework.family`),
whose `build(fw, device, params) -> Step` creates its inputs on the device
(outside timing) and returns the zero-argument step that the timer calls. The
step keeps its output alive so no compiler can drop the work. Adding a builder
module is all it takes for every framework of that family to run the workload.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypedDict, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from dlperf.core.settings import RunSettings
from dlperf.frameworks import REGISTRY, Framework, UnsupportedError


class WorkloadParams(BaseModel):
    """Base for parameter schemas: unknown keys are errors, not silently ignored; a float that is NaN or
    infinite is refused as not finite (else NaN fails whichever bound comes first, said as that bound)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    #: Parameters left out of a case's stored params (and so of its key) while they hold their default: one added
    #: after cases were stored (the model workload's `variant`) keeps those cases' keys, so `compare` and
    #: `history` still match them.
    OMIT_AT_DEFAULT: ClassVar[tuple[str, ...]] = ()

    def canonical(self) -> dict[str, Any]:
        """The params as a case stores them: JSON values, None ones and `OMIT_AT_DEFAULT` ones at their default
        left out."""
        fields = type(self).model_fields
        omit = {k for k in self.OMIT_AT_DEFAULT if getattr(self, k) == fields[k].default}
        return self.model_dump(mode="json", exclude_none=True, exclude=omit)


class InnerParams(TypedDict, total=False):
    """The parameters a workload that wraps another (serve, ddp) hands to the inner one's `parse`: its model,
    task and batch, and the shape and precision it sets."""

    model: str
    task: str
    batch: int
    seq_len: int
    image_size: int
    precision: str


@dataclass(frozen=True)
class Cost:
    """What one call of the step does, by the workload's documented counting convention.

    None means the workload does not model that quantity (never a guess).
    """

    flops: float | None = None
    bytes_moved: float | None = None
    samples: int = 1


@dataclass(frozen=True)
class Step:
    """A built workload: `fn` is what the timer calls; `result()` returns its last
    output as a float64 NumPy array (for correctness checks, never timed)."""

    fn: Callable[[], object]
    result: Callable[[], Any] | None = None
    #: What a cProfile profile should run (e.g. `fit` for a few batches); default: `fn` once.
    profile: Callable[[], Any] | None = None
    #: The bytes of each array the step touches, as built (inputs and its last output, so call it after `fn`):
    #: a workload whose cost counts arrays takes its bytes from these (`Workload.built_cost`), not from its dtype.
    array_nbytes: Callable[[], dict[str, int]] | None = None
    #: Times the step measured inside each of its calls (e.g. generation's time to first token), one dict per
    #: call of `fn` since it was built, in call order, seconds under `*_s` keys. The timer's samples are whole
    #: calls; these split each call into phases (the worker keeps the first call's and the timed calls').
    call_phases: Callable[[], list[dict[str, float]]] | None = None
    #: Inference on the first `n` samples of the built batch (1 <= n <= the batch), returning only when the
    #: outputs are on the host: what a serving system-under-test calls per batch of queries (`dlperf serve`).
    #: Set by inference steps only (cnn and transformer `task: infer`); None: this step cannot be served.
    predict: Callable[[int], object] | None = None


P = TypeVar("P", bound=WorkloadParams)


class Workload(Generic[P]):
    """Base workload. Subclasses set `name`, `Params`, define `cost`, and put builder modules in their package."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type[WorkloadParams]] = WorkloadParams
    #: A parameter along which memory grows: after an OOM the larger values of a series are not run (None: none).
    memory_axis: ClassVar[str | None] = None
    #: What one of `Cost.samples` is, in words (a time per sample is "s/<this>").
    sample_unit: ClassVar[str] = "sample"
    #: Frameworks of a family with a builder module that this workload nevertheless does not run (data, not code).
    excluded_frameworks: ClassVar[frozenset[str]] = frozenset()
    #: True: its `drive` runs the case in processes of its own (a torchrun job), which measure their memory
    #: themselves; the worker then never touches the device (no allocator reset or reading, no CUDA context).
    runs_in_own_processes: ClassVar[bool] = False

    @classmethod
    def builder_module(cls, family: str) -> str:
        """The module holding this workload's builder for a framework family (it may not exist)."""
        return f"dlperf.workloads.{cls.name}.{family}_{cls.name}"

    @classmethod
    def families(cls) -> set[str]:
        """Families that have a builder module here, found by listing the package (no framework is imported)."""
        package = importlib.import_module(f"dlperf.workloads.{cls.name}")
        suffix = f"_{cls.name}"
        return {m.name.removesuffix(suffix) for m in pkgutil.iter_modules(package.__path__)
                if m.name.endswith(suffix) and not m.ispkg}

    def frameworks(self) -> list[str]:
        """Registered frameworks whose family has a builder module, less `excluded_frameworks`."""
        families = self.families()
        return sorted(name for name, cls in REGISTRY.items()
                      if cls.family in families and name not in self.excluded_frameworks)

    def adapter(self, framework: str, raw: Mapping[str, object]) -> str:
        """The adapter a worker runs a case of `framework` with (its raw params `raw`): `framework` itself, unless
        the workload picks one of its modes from the params (the model workload's variants on TensorFlow, JAX)."""
        return framework

    def parse(self, raw: Mapping[str, object]) -> P:
        """The params of a case from its raw mapping (a study's, a stored case's, `InnerParams`), validated."""
        return cast(P, self.Params.model_validate(raw))

    def cost(self, params: P) -> Cost:
        raise NotImplementedError(f"{type(self).__name__} does not define a cost model")

    def built_cost(self, params: P, step: Step) -> Cost:
        """The cost of `step` as built (after it ran): the model's, unless the workload counts the built arrays."""
        return self.cost(params)

    def per_call_timing(self, params: P) -> bool:
        """True: time every call on its own (block 1), for percentiles of single calls; default: calibrated blocks."""
        return False

    def drive(self, fw: Framework, device: str, params: P, step: Step,
              settings: RunSettings) -> dict[str, Any] | None:
        """A workload that measures itself (serving under MLPerf's LoadGen) returns its case's metrics here, from
        the built `step` under the run's `settings`, instead of being timed by the
        timer; None (the default): the worker times `step.fn`."""
        return None

    def extra_metrics(self, params: P, step: Step) -> dict[str, Any]:
        """Figures of its own the workload adds to the case's metrics after timing (untimed; default none)."""
        return {}

    def steps_per_epoch(self, params: P) -> int | None:
        """Training steps in one epoch, for a time per epoch derived from the step's median; None: no epochs."""
        return None

    def build(self, fw: Framework, device: str, params: P) -> Step:
        """Build the step with the builder module of `fw`'s family (UnsupportedError when there is none)."""
        if fw.name not in self.frameworks():
            raise UnsupportedError(
                f"workload {self.name!r} has no {fw.name} implementation "
                f"(it has: {', '.join(self.frameworks())})"
            )
        builder = importlib.import_module(self.builder_module(fw.family))
        return cast(Step, builder.build(fw, device, params))


def driven_step(why: str) -> Step:
    """The built step of a workload whose `drive` runs the case in processes of its own (a torchrun job): its
    builder checks what this machine can run and returns this, which the timer never calls (`why` says so)."""

    def not_timed() -> None:
        raise RuntimeError(why)

    return Step(fn=not_timed)


def check_predict_n(n: int, batch: int) -> int:
    """`n` for `Step.predict`, or ValueError: a served batch takes 1 to the built `batch` samples."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= batch:
        raise ValueError(f"predict takes 1 to {batch} samples (the built batch), not {n!r}")
    return n
