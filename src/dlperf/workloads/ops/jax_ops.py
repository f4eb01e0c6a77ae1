"""The ops in JAX: jitted functions of their inputs (passed as arguments, so XLA cannot fold them).

attention is `jax.nn.dot_product_attention` (XLA's implementation, JAX's default), whose layout is
(B, T, H, D): q, k and v are transposed to it when built, and the output back only when checked.
It is compiled when built: in float16 on CPU it computes the products in float32 (F16_F16_F32), which
XLA's CPU dot refuses, so that case is `unsupported` with XLA's reason (bfloat16 runs).
layernorm is written out (jax.nn has none; XLA fuses it), gelu is `jax.nn.gelu(approximate=True)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import LAYERNORM_EPS, SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    p.require_default_backend(fw.name)
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    jax = fw.import_module()
    jnp = jax.numpy
    if dtype == "float64":  # without x64, JAX silently makes float64 arrays float32 (a worker runs one case)
        jax.config.update("jax_enable_x64", True)
    dt = getattr(jnp, dtype)
    dev = fw.jax_device(device)  # type: ignore[attr-defined]
    if op == "attention":  # (B, H, T, D) -> JAX's (B, T, H, D)
        inputs = {k: v.transpose(0, 2, 1, 3) for k, v in inputs.items()}
    x = {k: jax.device_put(jnp.asarray(v, dtype=dt), dev) for k, v in inputs.items()}

    def layernorm(a: Any, g: Any, b: Any) -> Any:
        mean = a.mean(axis=-1, keepdims=True)
        var = jnp.square(a - mean).mean(axis=-1, keepdims=True)
        return (a - mean) * jax.lax.rsqrt(var + LAYERNORM_EPS) * g + b

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
        "attention": lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=bool(p.causal)),
        "layernorm": layernorm,
        "gelu": lambda a: jax.nn.gelu(a, approximate=True),
    }
    names = ("q", "k", "v") if op == "attention" else ("a", "g", "b", "w")
    args = [x[k] for k in names if k in x]
    jitted = jax.jit(fns[op])
    if op == "attention":  # compiled now, so a dtype XLA cannot do on this device is `unsupported`
        try:
            jitted.lower(*args).compile()
        except ValueError as exc:  # seen: float16 on CPU, "precision 'F16_F16_F32' is not supported"
            if "not supported" not in str(exc):
                raise
            raise UnsupportedError(f"jax {jax.__version__}'s dot_product_attention in {dtype} on {device}: "
                                   f"{str(exc).splitlines()[0]}") from None
    kept: list[Any] = [None]

    def step() -> Any:
        kept[0] = jitted(*args)
        return kept[0]

    def array_nbytes() -> dict[str, int]:  # the output exists once the step ran
        return {k: int(v.nbytes) for k, v in {**x, "out": kept[0]}.items()}

    def result() -> np.ndarray:
        out = np.asarray(kept[0], dtype=np.float64)
        return out.transpose(0, 2, 1, 3) if op == "attention" else out

    return Step(step, result, array_nbytes=array_nbytes)
