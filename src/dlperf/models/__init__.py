"""The CNNs of study 001 (and study 004's CaffeNet), defined once and built in PyTorch or TensorFlow.

A framework family's builder is the module `<family>_models` here (`torch_models`, `tensorflow_models`).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from dlperf.models.spec import ModelSpec, forward_flops, layers, param_count, train_flops
from dlperf.models.zoo import MODELS


def get_spec(name: str, num_classes: int | None = None) -> ModelSpec:
    """The model's definition; `num_classes` None keeps its own default (1000; 10 for LeNet-5)."""
    try:
        return MODELS[name]() if num_classes is None else MODELS[name](num_classes)
    except KeyError:
        raise KeyError(f"unknown model {name!r} (known: {', '.join(sorted(MODELS))})") from None


def build(name: str, framework: str, num_classes: int | None = 1000, image_size: int | None = None) -> Any:
    """The framework's native model: a torch nn.Module (NCHW) or a keras.Model (NHWC), returning logits.

    Built by `dlperf.models.<family>_models` for the registered framework's family (tensorflow-eager: tensorflow).
    """
    from dlperf.frameworks import REGISTRY

    spec = get_spec(name, num_classes)
    families = model_families()
    cls = REGISTRY.get(framework)
    if cls is None or cls.family not in families:
        raise ValueError(f"models are built for {' or '.join(sorted(families))}, not {framework!r}")
    return importlib.import_module(f"dlperf.models.{cls.family}_models").build(spec, image_size)


def model_families() -> set[str]:
    """Framework families with a `<family>_models` module here (found by listing the package, importing none)."""
    return {m.name.removesuffix("_models") for m in pkgutil.iter_modules(__path__) if m.name.endswith("_models")}


__all__ = ["MODELS", "ModelSpec", "build", "forward_flops", "get_spec", "layers", "model_families", "param_count",
           "train_flops"]
