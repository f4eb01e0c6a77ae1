"""Keras (TensorFlow) models built from a ModelSpec, NHWC, and the weight copy from PyTorch.

Each construct is the PyTorch one's exact function, not an approximation:
- grouped convolutions are split + one Conv2D per group + concat (TensorFlow's
  CPU kernels do not implement `groups`), named `<layer>_g<i>`;
- symmetric padding is an explicit zero pad before a 'valid' convolution;
- ceil-mode max pooling pads the right and bottom with -inf, as Caffe does;
- LRN uses alpha/size, Caffe's and torch's scaling (TensorFlow's does not divide).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlperf.models import spec as S


def _layers() -> dict[str, type]:
    """Custom Keras layers (defined on first use: importing TensorFlow takes seconds)."""
    import keras
    import tensorflow as tf

    class SplitChannels(keras.layers.Layer):
        def __init__(self, groups: int, **kw: Any) -> None:
            super().__init__(**kw)
            self.groups = groups

        def call(self, x: Any) -> Any:
            return tf.split(x, self.groups, axis=-1)

    class CaffeMaxPool(keras.layers.Layer):
        """Max pooling with symmetric padding `p` and, with `ceil`, Caffe's rounding up (pads with -inf)."""

        def __init__(self, k: int, s: int, p: int, ceil: bool, **kw: Any) -> None:
            super().__init__(**kw)
            self.k, self.s, self.p, self.ceil = k, s, p, ceil

        def call(self, x: Any) -> Any:
            pads = [[0, 0]]
            for n in (x.shape[1], x.shape[2]):
                out = S.pool_out(n, self.k, self.s, self.p, self.ceil)
                pads.append([self.p, max(0, (out - 1) * self.s + self.k - n - self.p)])
            pads.append([0, 0])
            if any(a or b for a, b in pads):
                x = tf.pad(x, pads, constant_values=float("-inf"))
            return tf.nn.max_pool2d(x, self.k, self.s, "VALID")

    class CaffeLRN(keras.layers.Layer):
        def __init__(self, size: int, alpha: float, beta: float, k: float, **kw: Any) -> None:
            super().__init__(**kw)
            self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

        def call(self, x: Any) -> Any:
            y = tf.nn.local_response_normalization(
                tf.cast(x, tf.float32), depth_radius=self.size // 2, bias=self.k, alpha=self.alpha / self.size,
                beta=self.beta)
            return tf.cast(y, x.dtype)

    return {"SplitChannels": SplitChannels, "CaffeMaxPool": CaffeMaxPool, "CaffeLRN": CaffeLRN}


def build(model: S.ModelSpec, image_size: int | None = None) -> Any:
    """A functional keras.Model taking (N, H, W, C) float inputs and returning logits."""
    import keras

    custom = _layers()
    L = keras.layers
    size = image_size or model.image_size
    inp = keras.Input((size, size, model.in_channels), name="data")

    def apply(layers: Any, x: Any) -> Any:
        for layer in layers:
            if isinstance(layer, S.Conv):
                if layer.p:
                    x = L.ZeroPadding2D(layer.p, name=f"{layer.name}_pad")(x)
                act = "relu" if layer.relu else None
                if layer.groups == 1:
                    x = L.Conv2D(layer.out, layer.k, layer.s, activation=act, name=layer.name)(x)
                else:
                    parts = custom["SplitChannels"](layer.groups, name=f"{layer.name}_split")(x)
                    outs = [L.Conv2D(layer.out // layer.groups, layer.k, layer.s, activation=act,
                                     name=f"{layer.name}_g{i}")(part) for i, part in enumerate(parts)]
                    x = L.Concatenate(axis=-1, name=f"{layer.name}_concat")(outs)
            elif isinstance(layer, S.Pool):
                if layer.kind == "max":
                    x = custom["CaffeMaxPool"](layer.k, layer.s, layer.p, layer.ceil, name=layer.name)(x)
                elif layer.p or layer.ceil:
                    raise NotImplementedError(f"{layer.name}: padded/ceil average pooling is not defined here")
                else:
                    x = L.AveragePooling2D(layer.k, layer.s, name=layer.name)(x)
            elif isinstance(layer, S.GlobalAvgPool):
                x = L.GlobalAveragePooling2D(keepdims=True, name=layer.name)(x)
            elif isinstance(layer, S.LRN):
                x = custom["CaffeLRN"](layer.size, layer.alpha, layer.beta, layer.k, name=layer.name)(x)
            elif isinstance(layer, S.Flatten):
                x = L.Flatten(name=layer.name)(x)
            elif isinstance(layer, S.Dropout):
                x = L.Dropout(layer.p, name=layer.name)(x)
            elif isinstance(layer, S.Linear):
                x = L.Dense(layer.out, activation="relu" if layer.relu else None, name=layer.name)(x)
            elif isinstance(layer, S.Inception):
                outs = [apply(branch, x) for branch in layer.branches()]
                x = L.Concatenate(axis=-1, name=layer.name)(outs)
            else:
                raise TypeError(f"unknown layer {layer!r}")
        return x

    return keras.Model(inp, apply(model.layers, inp), name=model.name)


def copy_from_torch(model: S.ModelSpec, tf_model: Any, torch_net: Any, image_size: int | None = None) -> None:
    """Set the Keras model's weights to the PyTorch net's, layer by layer, so both compute the same function."""
    from dlperf.models.torch_models import weighted

    by_name = weighted(torch_net)
    for li in S.layers(model, image_size):
        if li.kind not in ("conv", "linear"):
            continue
        mod = by_name[li.name]
        w = mod.weight.detach().cpu().numpy()
        b = mod.bias.detach().cpu().numpy()
        if li.kind == "linear":
            if li.flatten_from is not None:  # torch flattens (C, H, W); Keras flattens (H, W, C)
                c, h, wd = li.flatten_from
                w = w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1).reshape(w.shape[0], -1)
            tf_model.get_layer(li.name).set_weights([w.T, b])
            continue
        groups = li.in_shape[0] // w.shape[1]
        kernel = w.transpose(2, 3, 1, 0)  # (O, I/g, kh, kw) -> (kh, kw, I/g, O)
        if groups == 1:
            tf_model.get_layer(li.name).set_weights([kernel, b])
        else:
            per = w.shape[0] // groups
            for g in range(groups):
                tf_model.get_layer(f"{li.name}_g{g}").set_weights(
                    [np.ascontiguousarray(kernel[..., g * per:(g + 1) * per]), b[g * per:(g + 1) * per]])
