"""The CNN training step in PyTorch (NCHW; autocast + GradScaler for `amp` on CUDA, bfloat16 on CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.models import torch_models
from dlperf.workloads.base import Step
from dlperf.workloads.cnn import CnnParams


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    if p.task != "train":
        raise UnsupportedError(f"cnn task {p.task!r} is not built for torch yet")
    torch = fw.import_module()
    model = p.spec()
    size = p.size()
    net = torch_models.build(model, p.image_size).to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=p.lr, momentum=p.momentum)
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(p.batch, model.in_channels, size, size, generator=gen).to(device)
    y = torch.randint(0, p.classes(), (p.batch,), generator=gen).to(device)
    loss_fn = torch.nn.CrossEntropyLoss()
    dev_type = torch.device(device).type
    amp = p.precision == "amp"
    if amp and dev_type not in ("cuda", "cpu"):
        raise UnsupportedError(f"mixed precision is not supported on {device}")
    amp_dtype = torch.float16 if dev_type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(dev_type, enabled=amp and dev_type == "cuda")
    last: list[Any] = [None]

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev_type, dtype=amp_dtype, enabled=amp):
            loss = loss_fn(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        last[0] = loss
        return loss

    return Step(step, lambda: np.array([float(last[0].detach())]) if last[0] is not None else np.array([]))
