"""The same architecture in PyTorch, float64 like dlperf.nn, as the reference."""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.workloads.backends import CNN_CHANNELS, PROFILE_BATCHES, BackendsParams, data
from dlperf.workloads.base import Step


def build(fw: Framework, device: str, p: BackendsParams) -> Step:
    torch = fw.import_module()
    x, y = data(p)
    torch.manual_seed(p.seed)
    if p.model == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    else:
        model = torch.nn.Sequential(torch.nn.Conv2d(1, CNN_CHANNELS, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                    torch.nn.Linear(CNN_CHANNELS * 16, 10))
    model = model.double().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = [(torch.from_numpy(x[i:i + p.batch_size]).to(device),
                torch.from_numpy(y[i:i + p.batch_size]).to(device)) for i in range(0, len(x), p.batch_size)]
    cursor = [0]

    def step() -> Any:
        xb, yb = batches[cursor[0] % len(batches)]
        cursor[0] += 1
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    def fit_few() -> None:
        for _ in range(PROFILE_BATCHES):
            step()

    return Step(step, profile=fit_few)
