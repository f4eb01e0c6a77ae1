"""The ops in PyTorch, on CPU or CUDA; `out=` buffers where torch has them.

attention is `F.scaled_dot_product_attention` inside `torch.nn.attention.sdpa_kernel(backends)`: the
case's backend alone (math, flash, efficient, cudnn), or every backend for `default` (torch's own choice),
so every variant pays the same few microseconds of entering the context per call. A backend torch cannot
run for the case (device, dtype, shape) is `unsupported`, with torch's reason, found by running it once
while building. On CPU torch 2.13 has math and a flash kernel (`_scaled_dot_product_flash_attention_for_cpu`,
its default choice); efficient and cuDNN are CUDA-only.
"""

from __future__ import annotations

import warnings
from typing import Any

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import LAYERNORM_EPS, SCALAR

#: The case's `backend` -> torch's SDPBackend member name.
SDP_BACKENDS = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                "cudnn": "CUDNN_ATTENTION"}


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    torch = fw.import_module()
    dt = getattr(torch, dtype)
    x = {k: torch.from_numpy(v).to(device=device, dtype=dt) for k, v in inputs.items()}
    if op == "attention":
        return _attention(torch, x, p, device)
    a, b = x["a"], x.get("b")
    out = torch.empty((a.shape[0], b.shape[1]) if op == "dot" else a.shape, dtype=dt, device=device)
    kept: list[Any] = [out]

    def keep(t: Any) -> None:
        kept[0] = t

    F = torch.nn.functional
    fns = {
        "add": lambda: torch.add(a, b, out=out),
        "mul": lambda: torch.mul(a, b, out=out),
        "scalar": lambda: torch.mul(a, SCALAR, out=out),
        "sigmoid": lambda: torch.sigmoid(a, out=out),
        "tanh": lambda: torch.tanh(a, out=out),
        "relu": lambda: torch.clamp_min(a, 0, out=out),
        "softmax": lambda: keep(torch.softmax(a, dim=1)),
        "dot": lambda: torch.matmul(a, b, out=out),
        "conv2d": lambda: keep(F.conv2d(a, x["w"], padding=x["w"].shape[-1] // 2)),
        "layernorm": lambda: keep(F.layer_norm(a, a.shape[-1:], x.get("g"), b, LAYERNORM_EPS)),
        "gelu": lambda: keep(F.gelu(a, approximate="tanh")),
    }
    return _step(torch, fns[op], x, kept)


def _step(torch: Any, fn: Any, x: dict[str, Any], kept: list[Any]) -> Step:
    def array_nbytes() -> dict[str, int]:
        return {k: int(t.element_size() * t.nelement()) for k, t in {**x, "out": kept[0]}.items()}

    return Step(fn, lambda: kept[0].detach().to("cpu", torch.float64).numpy(), array_nbytes=array_nbytes)


def sdpa_backends(torch: Any, backend: str | None) -> list[Any]:
    """The SDPBackend members a case's `backend` enables: that one, or all of them for the default."""
    from torch.nn.attention import SDPBackend

    names = [SDP_BACKENDS[backend]] if backend else list(SDP_BACKENDS.values())
    return [getattr(SDPBackend, n) for n in names]


def chosen_backend(torch: Any, q: Any, k: Any, v: Any, causal: bool, backends: list[Any]) -> str | None:
    """Which backend torch picks for these tensors under `backends` (our name), None where it cannot tell."""
    from torch.nn.attention import sdpa_kernel

    choice = getattr(torch, "_fused_sdp_choice", None)  # private; the dispatcher's own choice
    if choice is None:
        return None
    with sdpa_kernel(backends):
        index = int(choice(q, k, v, None, 0.0, causal))
    by_index = {int(getattr(torch.nn.attention.SDPBackend, n)): ours for ours, n in SDP_BACKENDS.items()}
    return by_index.get(index)


def _attention(torch: Any, x: dict[str, Any], p: OpsParams, device: str) -> Step:
    from torch.nn.attention import sdpa_kernel

    q, k, v = x["q"], x["k"], x["v"]
    causal = bool(p.causal)
    backends = sdpa_backends(torch, p.backend)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    kept: list[Any] = [None]

    def step() -> Any:
        with sdpa_kernel(backends):
            kept[0] = sdpa(q, k, v, is_causal=causal)
        return kept[0]

    with warnings.catch_warnings(record=True) as seen:  # torch warns why each fused kernel cannot run
        warnings.simplefilter("always")
        try:
            step()
        except RuntimeError as exc:
            if "backend" not in str(exc) and "kernel" not in str(exc):
                raise
            why = "; ".join(dict.fromkeys(str(w.message).strip() for w in seen)) or str(exc).splitlines()[0]
            if device == "cpu":
                why += " (torch's CPU attention kernels are math and flash)"
            raise UnsupportedError(f"torch {torch.__version__} cannot run the {p.backend} attention backend on "
                                   f"{device} for {p.dtype} {tuple(q.shape)}{' causal' if causal else ''}: "
                                   f"{why}"[:600]) from None
    return _step(torch, step, x, kept)
