"""The CNN in PyTorch (NCHW): a training step (autocast + GradScaler for `amp` on CUDA, bfloat16 on CPU), or
(`task: infer`) a forward pass in eval mode under `torch.inference_mode` (autocast likewise for `amp`), the
logits copied to the host as float32 (the copy syncs the device), which `Step.predict` does for the first n images."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.frameworks import Framework, UnsupportedError
from dlperf.models import torch_models
from dlperf.workloads.base import Step, check_predict_n
from dlperf.workloads.cnn import CnnParams


def build(fw: Framework, device: str, p: CnnParams) -> Step:
    torch = fw.import_module()
    model = p.spec()
    size = p.size()
    net = torch_models.build(model, p.image_size).to(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(p.batch, model.in_channels, size, size, generator=gen).to(device)
    y = torch.randint(0, p.classes(), (p.batch,), generator=gen).to(device)
    dev_type = torch.device(device).type
    amp = p.precision == "amp"
    if amp and dev_type not in ("cuda", "cpu"):
        raise UnsupportedError(f"mixed precision is not supported on {device}")
    amp_dtype = torch.float16 if dev_type == "cuda" else torch.bfloat16
    if p.task == "infer":
        return _infer(torch, net.eval(), x, dev_type, amp, amp_dtype)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=p.lr, momentum=p.momentum)
    loss_fn = torch.nn.CrossEntropyLoss()
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


def _infer(torch: Any, net: Any, x: Any, dev_type: str, amp: bool, amp_dtype: Any) -> Step:
    batch = int(x.shape[0])
    last: list[Any] = [None]

    def forward(inputs: Any) -> Any:
        with torch.inference_mode(), torch.autocast(dev_type, dtype=amp_dtype, enabled=amp):
            return net(inputs).float().cpu()  # float32 on the host: the copy waits for the device

    def step() -> Any:
        last[0] = forward(x)
        return last[0]

    def predict(n: int) -> Any:
        return forward(x[:check_predict_n(n, batch)])  # a view: no copy of the inputs

    def result() -> np.ndarray:
        return np.array([]) if last[0] is None else last[0].numpy().astype(np.float64)

    return Step(step, result, predict=predict)
