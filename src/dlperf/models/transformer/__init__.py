"""Transformers (a GPT-2-shaped decoder, a BERT-shaped encoder) defined once and built in PyTorch, Keras 3 and
JAX/Flax. `config` holds the shape and the framework-neutral weights, `cost` the FLOPs convention, `reference`
a float64 NumPy forward pass; `<family>_model` builds the model in a framework (imported only when used).
"""

from __future__ import annotations

from dlperf.models.transformer.config import (
    PRESETS,
    TransformerConfig,
    check_weights,
    get_config,
    init_weights,
    make_labels,
    make_tokens,
    param_count,
    weight_shapes,
)

__all__ = ["PRESETS", "TransformerConfig", "check_weights", "get_config", "init_weights", "make_labels",
           "make_tokens", "param_count",
           "weight_shapes"]
