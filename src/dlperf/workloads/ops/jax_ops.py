"""The ops in JAX: jitted functions of their inputs (passed as arguments, so XLA cannot fold them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    jax = fw.import_module()
    jnp = jax.numpy
    if dtype == "float64":  # without x64, JAX silently makes float64 arrays float32 (a worker runs one case)
        jax.config.update("jax_enable_x64", True)
    dt = getattr(jnp, dtype)
    dev = fw.jax_device(device)  # type: ignore[attr-defined]
    x = {k: jax.device_put(jnp.asarray(v, dtype=dt), dev) for k, v in inputs.items()}
    fns = {
        "add": lambda a, b: a + b,
        "mul": lambda a, b: a * b,
        "scalar": lambda a: SCALAR * a,
        "sigmoid": jax.nn.sigmoid,
        "tanh": jnp.tanh,
        "relu": jax.nn.relu,
        "softmax": lambda a: jax.nn.softmax(a, axis=1),
        "dot": jnp.matmul,
        "conv2d": lambda a, w: jax.lax.conv_general_dilated(
            a, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")),
    }
    args = [x["a"]] + [x[k] for k in ("b", "w") if k in x]
    jitted = jax.jit(fns[op])
    kept: list[Any] = [None]

    def step() -> Any:
        kept[0] = jitted(*args)
        return kept[0]

    def array_nbytes() -> dict[str, int]:  # the output exists once the step ran
        return {k: int(v.nbytes) for k, v in {**x, "out": kept[0]}.items()}

    return Step(step, lambda: np.asarray(kept[0], dtype=np.float64), array_nbytes=array_nbytes)
