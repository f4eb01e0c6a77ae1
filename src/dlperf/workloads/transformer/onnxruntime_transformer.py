"""Transformer inference (the logits forward) on ONNX Runtime: the torch model exported to ONNX once, fp32.

Task infer only: training and generation end `unsupported` with the reason. Weights `init_weights(cfg, 0)` and
tokens `make_tokens(cfg, batch, seq_len)`, as the torch builder uses (its weights are seed 0 whatever the case's
seed), so the logits are the same function. A timed call is the forward through an IOBinding, the logits left on
the device as torch's infer step leaves them (`runtime_steps`).
"""

from __future__ import annotations

from typing import Any

from dlperf.frameworks import Framework
from dlperf.models import onnx_export
from dlperf.models.transformer import make_tokens
from dlperf.workloads import runtime_steps as rs
from dlperf.workloads.base import Step
from dlperf.workloads.transformer import TransformerParams

LOW_REASON = ("the exported graph is float32 and ONNX Runtime has no autocast (on any execution provider); dlperf "
              "makes no low-precision copy of it")


def session(fw: Framework, device: str, p: TransformerParams) -> Any:
    """The InferenceSession this builder times (checks first, then the cached export)."""
    rs.check_task(fw, p.task)
    rs.check_precision(fw, p.precision, ("fp32",), LOW_REASON)
    return rs.ort_session(fw, device, onnx_export.export_transformer(p.config(), seed=0, isolated=True))


def inputs(p: TransformerParams) -> Any:
    """The seeded token batch (batch, seq_len) int64: the torch builder's."""
    assert p.seq_len is not None
    return make_tokens(p.config(), p.batch, p.seq_len)


def build(fw: Framework, device: str, p: TransformerParams) -> Step:
    return rs.ort_step(fw, session(fw, device, p), device, inputs(p), copy_to_host=False)
