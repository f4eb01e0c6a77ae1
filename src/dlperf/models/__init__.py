"""The CNNs of study 001 (and study 004's CaffeNet), defined once and built in PyTorch or TensorFlow."""

from __future__ import annotations

from typing import Any

from dlperf.models.spec import ModelSpec, forward_flops, layers, param_count, train_flops
from dlperf.models.zoo import MODELS

#: Framework names `build` accepts, and the module building for each.
FRAMEWORKS = {"torch": "torch", "pytorch": "torch", "tensorflow": "tensorflow", "keras": "tensorflow",
              "tensorflow-eager": "tensorflow"}


def get_spec(name: str, num_classes: int | None = None) -> ModelSpec:
    """The model's definition; `num_classes` None keeps its own default (1000; 10 for LeNet-5)."""
    try:
        return MODELS[name]() if num_classes is None else MODELS[name](num_classes)
    except KeyError:
        raise KeyError(f"unknown model {name!r} (known: {', '.join(sorted(MODELS))})") from None


def build(name: str, framework: str, num_classes: int | None = 1000, image_size: int | None = None) -> Any:
    """The framework's native model: a torch nn.Module (NCHW) or a keras.Model (NHWC), returning logits."""
    spec = get_spec(name, num_classes)
    which = FRAMEWORKS.get(framework)
    if which == "torch":
        from dlperf.models import torch_models

        return torch_models.build(spec, image_size)
    if which == "tensorflow":
        from dlperf.models import tf_models

        return tf_models.build(spec, image_size)
    raise ValueError(f"models are built for torch or tensorflow, not {framework!r}")


__all__ = ["MODELS", "ModelSpec", "build", "forward_flops", "get_spec", "layers", "param_count", "train_flops"]
