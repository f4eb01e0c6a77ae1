"""Framework-neutral definitions of the CNNs, and what follows from them alone.

One definition per model drives the PyTorch and the TensorFlow builders, the
weight copy between them, the Caffe prototxt, the cost model (FLOPs per layer)
and the memory model (parameters and activations per layer). Shapes are (C, H, W).

Counting convention for FLOPs: a multiply-add of a convolution or a fully
connected layer is 2 FLOPs; bias additions, ReLU, pooling, LRN, dropout and the
loss are not counted (they are well under 1% of these nets). This is the
convention of torch.utils.flop_counter.FlopCounterMode, which the tests use to
check it. A training step is forward + gradient w.r.t. weights + gradient w.r.t.
inputs, the last skipped for the first layer (its input needs no gradient).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Conv:
    name: str
    out: int
    k: int
    s: int = 1
    p: int = 0
    groups: int = 1
    relu: bool = True


@dataclass(frozen=True)
class Pool:
    """Max or average pooling; `ceil` is Caffe's (and torch's ceil_mode) output rounding."""

    name: str
    kind: str  # "max" | "avg"
    k: int
    s: int
    p: int = 0
    ceil: bool = False


@dataclass(frozen=True)
class GlobalAvgPool:
    name: str


@dataclass(frozen=True)
class LRN:
    """Local response normalisation across channels, Caffe's form: x / (k + alpha/size * sum x^2)^beta."""

    name: str
    size: int = 5
    alpha: float = 1e-4
    beta: float = 0.75
    k: float = 1.0


@dataclass(frozen=True)
class Flatten:
    name: str = "flatten"


@dataclass(frozen=True)
class Dropout:
    name: str
    p: float = 0.5


@dataclass(frozen=True)
class Linear:
    name: str
    out: int
    relu: bool = True


@dataclass(frozen=True)
class Inception:
    """GoogLeNet's block: 1x1 | 1x1->3x3 | 1x1->5x5 | 3x3 max pool->1x1, concatenated on channels."""

    name: str
    c1: int
    c3r: int
    c3: int
    c5r: int
    c5: int
    pp: int

    def branches(self) -> list[list[Conv | Pool]]:
        n = self.name
        return [
            [Conv(f"{n}_1x1", self.c1, 1)],
            [Conv(f"{n}_3x3_reduce", self.c3r, 1), Conv(f"{n}_3x3", self.c3, 3, p=1)],
            [Conv(f"{n}_5x5_reduce", self.c5r, 1), Conv(f"{n}_5x5", self.c5, 5, p=2)],
            [Pool(f"{n}_pool", "max", 3, 1, p=1, ceil=True), Conv(f"{n}_pool_proj", self.pp, 1)],
        ]


Layer = Conv | Pool | GlobalAvgPool | LRN | Flatten | Dropout | Linear | Inception


@dataclass(frozen=True)
class ModelSpec:
    name: str
    reference: str
    published_params: int
    published_params_classes: int
    in_channels: int
    image_size: int
    layers: tuple[Layer, ...]
    num_classes: int = 1000
    notes: str = ""


@dataclass(frozen=True)
class LayerInfo:
    """One weighted or shaping layer after shape inference (inception branches flattened)."""

    name: str
    kind: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    params: int = 0
    macs: int = 0  # multiply-adds per sample
    first: bool = False  # the first weighted layer (no input gradient in training)
    groups: int = 1
    flatten_from: tuple[int, int, int] | None = None  # a Linear fed by a flatten of this (C, H, W)


def pool_out(n: int, k: int, s: int, p: int, ceil: bool) -> int:
    """Output length of a pooling window, with torch's ceil_mode rule (the last window starts inside)."""
    span = n + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def conv_out(n: int, k: int, s: int, p: int) -> int:
    return (n + 2 * p - k) // s + 1


def _walk(layers: tuple[Layer, ...] | list, shape: tuple[int, ...], state: dict) -> Iterator[LayerInfo]:
    for layer in layers:
        if isinstance(layer, Inception):
            outs = []
            for branch in layer.branches():
                b_shape = shape
                for info in _walk(branch, shape, state):
                    b_shape = info.out_shape
                    yield info
                outs.append(b_shape)
            shape = (sum(o[0] for o in outs), *outs[0][1:])
            yield LayerInfo(layer.name, "concat", shape, shape)
            continue
        info = _one(layer, shape, state)
        shape = info.out_shape
        yield info


def _one(layer: Layer, shape: tuple[int, ...], state: dict) -> LayerInfo:
    if isinstance(layer, Conv):
        c, h, w = shape
        if c % layer.groups or layer.out % layer.groups:
            raise ValueError(f"{layer.name}: channels {c}->{layer.out} not divisible by groups {layer.groups}")
        oh, ow = conv_out(h, layer.k, layer.s, layer.p), conv_out(w, layer.k, layer.s, layer.p)
        if oh < 1 or ow < 1:
            raise ValueError(f"{layer.name}: input {h}x{w} is too small for a {layer.k}x{layer.k} convolution")
        weights = layer.out * (c // layer.groups) * layer.k * layer.k
        first = not state.get("seen_weighted")
        state["seen_weighted"] = True
        return LayerInfo(layer.name, "conv", shape, (layer.out, oh, ow), weights + layer.out, weights * oh * ow,
                         first, groups=layer.groups)
    if isinstance(layer, Pool):
        c, h, w = shape
        oh, ow = (pool_out(h, layer.k, layer.s, layer.p, layer.ceil), pool_out(w, layer.k, layer.s, layer.p,
                                                                                 layer.ceil))
        if oh < 1 or ow < 1:
            raise ValueError(f"{layer.name}: input {h}x{w} is too small for a {layer.k}x{layer.k} pool")
        return LayerInfo(layer.name, f"{layer.kind}pool", shape, (c, oh, ow))
    if isinstance(layer, GlobalAvgPool):
        return LayerInfo(layer.name, "avgpool", shape, (shape[0], 1, 1))
    if isinstance(layer, (LRN, Dropout)):
        return LayerInfo(layer.name, type(layer).__name__.lower(), shape, shape)
    if isinstance(layer, Flatten):
        state["flatten_from"] = shape
        return LayerInfo(layer.name, "flatten", shape, (math.prod(shape),))
    if isinstance(layer, Linear):
        (n_in,) = shape
        first = not state.get("seen_weighted")
        state["seen_weighted"] = True
        src = state.pop("flatten_from", None)
        return LayerInfo(layer.name, "linear", shape, (layer.out,), n_in * layer.out + layer.out, n_in * layer.out,
                         first, flatten_from=src if src and src[1] * src[2] > 1 else None)
    raise TypeError(f"unknown layer {layer!r}")


def layers(spec: ModelSpec, image_size: int | None = None) -> list[LayerInfo]:
    """Every layer with shapes, parameters and multiply-adds per sample, for this input size."""
    size = image_size or spec.image_size
    return list(_walk(spec.layers, (spec.in_channels, size, size), {}))


def param_count(spec: ModelSpec, image_size: int | None = None) -> int:
    return sum(li.params for li in layers(spec, image_size))


def forward_flops(spec: ModelSpec, batch: int, image_size: int | None = None) -> int:
    """FLOPs of one forward pass of `batch` samples (2 per multiply-add of conv and linear layers)."""
    return 2 * batch * sum(li.macs for li in layers(spec, image_size))


def train_flops(spec: ModelSpec, batch: int, image_size: int | None = None) -> int:
    """FLOPs of one training step: forward, weight gradients, input gradients (none for the first layer)."""
    total = 0
    for li in layers(spec, image_size):
        if li.macs:
            total += 2 * batch * li.macs * (2 if li.first else 3)
    return total
