"""The ops in PyTorch, on CPU or CUDA; `out=` buffers where torch has them."""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.workloads.base import Step
from dlperf.workloads.ops import OpsParams
from dlperf.workloads.ops.spec import SCALAR


def build(fw: Framework, device: str, p: OpsParams) -> Step:
    op, dtype, inputs = p.op, p.dtype, p.inputs()
    torch = fw.import_module()
    dt = getattr(torch, dtype)
    x = {k: torch.from_numpy(v).to(device=device, dtype=dt) for k, v in inputs.items()}
    a, b = x["a"], x.get("b")
    out = torch.empty((a.shape[0], b.shape[1]) if op == "dot" else a.shape, dtype=dt, device=device)
    kept: list[Any] = [out]

    def keep(t: Any) -> None:
        kept[0] = t

    fns = {
        "add": lambda: torch.add(a, b, out=out),
        "mul": lambda: torch.mul(a, b, out=out),
        "scalar": lambda: torch.mul(a, SCALAR, out=out),
        "sigmoid": lambda: torch.sigmoid(a, out=out),
        "tanh": lambda: torch.tanh(a, out=out),
        "relu": lambda: torch.clamp_min(a, 0, out=out),
        "softmax": lambda: keep(torch.softmax(a, dim=1)),
        "dot": lambda: torch.matmul(a, b, out=out),
        "conv2d": lambda: keep(torch.nn.functional.conv2d(a, x["w"], padding=x["w"].shape[-1] // 2)),
    }
    def array_nbytes() -> dict[str, int]:
        return {k: int(t.element_size() * t.nelement()) for k, t in {**x, "out": kept[0]}.items()}

    return Step(fns[op], lambda: kept[0].detach().to("cpu", torch.float64).numpy(), array_nbytes=array_nbytes)
