"""A small model to try `dlperf bench` on: a 3-layer MLP over 256 features, 10 classes.

    dlperf bench examples/mlp.py:build --input x:float32[B,256] --batch 1 --batch 32

`build()` returns the module (dlperf calls it after seeding torch, so every path gets the same weights);
`example_inputs(batch)` gives its inputs when no --input is given; `loss(outputs, batch)` is the training loss.
"""

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, features: int = 256, hidden: int = 512, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes))
        self.features = features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def example_inputs(self, batch: int) -> torch.Tensor:
        return torch.randn(batch, self.features, generator=torch.Generator().manual_seed(0))


def build() -> nn.Module:
    return Mlp()


def loss(outputs: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against labels derived from the inputs (a fixed synthetic task)."""
    labels = (batch.sum(dim=1) > 0).long()
    return nn.functional.cross_entropy(outputs, labels)
