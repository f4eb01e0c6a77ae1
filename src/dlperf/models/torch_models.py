"""PyTorch modules built from a ModelSpec (NCHW). Module names are the spec's layer names."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from dlperf.models import spec as S


def build(model: S.ModelSpec, image_size: int | None = None) -> Any:
    """An nn.Sequential of the spec's layers for square inputs of `image_size` (default: the model's)."""
    import torch.nn as nn

    linear_in = {li.name: li.in_shape[0] for li in S.layers(model, image_size) if li.kind == "linear"}

    class InceptionBlock(nn.Module):
        def __init__(self, block: S.Inception, c_in: int) -> None:
            super().__init__()
            self.branches = nn.ModuleList(nn.Sequential(OrderedDict(_modules(b, c_in))) for b in block.branches())

        def forward(self, x: Any) -> Any:
            import torch

            return torch.cat([b(x) for b in self.branches], dim=1)

    def _modules(layers: Any, c: int) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for layer in layers:
            if isinstance(layer, S.Conv):
                out.append((layer.name, nn.Conv2d(c, layer.out, layer.k, layer.s, layer.p, groups=layer.groups)))
                c = layer.out
                if layer.relu:
                    out.append((f"{layer.name}_relu", nn.ReLU(inplace=True)))
            elif isinstance(layer, S.Pool):
                cls = nn.MaxPool2d if layer.kind == "max" else nn.AvgPool2d
                out.append((layer.name, cls(layer.k, layer.s, layer.p, ceil_mode=layer.ceil)))
            elif isinstance(layer, S.GlobalAvgPool):
                out.append((layer.name, nn.AdaptiveAvgPool2d(1)))
            elif isinstance(layer, S.LRN):
                out.append((layer.name, nn.LocalResponseNorm(layer.size, layer.alpha, layer.beta, layer.k)))
            elif isinstance(layer, S.Flatten):
                out.append((layer.name, nn.Flatten()))
            elif isinstance(layer, S.Dropout):
                out.append((layer.name, nn.Dropout(layer.p)))
            elif isinstance(layer, S.Linear):
                out.append((layer.name, nn.Linear(linear_in[layer.name], layer.out)))
                if layer.relu:
                    out.append((f"{layer.name}_relu", nn.ReLU(inplace=True)))
            elif isinstance(layer, S.Inception):
                out.append((layer.name, InceptionBlock(layer, c)))
                c = layer.c1 + layer.c3 + layer.c5 + layer.pp
            else:
                raise TypeError(f"unknown layer {layer!r}")
        return out

    return nn.Sequential(OrderedDict(_modules(model.layers, model.in_channels)))


def weighted(net: Any) -> dict[str, Any]:
    """Spec layer name -> torch Conv2d / Linear module (inception branches included)."""
    import torch.nn as nn

    return {name.split(".")[-1]: m for name, m in net.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
