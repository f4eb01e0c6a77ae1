"""The transformer study's memory piece: each training case's measured peak beside the memory model's ESTIMATE.

Measured: `CaseResult.peak_memory()` (the allocator's peak on a GPU, the worker's peak RSS on a CPU). Estimated:
`models.transformer.memory.train_memory` for the case's config, batch, sequence length and precision; on a CPU
the host estimate plus the framework's own footprint the worker measured before building the step
(`baseline_rss_bytes`), as the CNN's memory validation does (hardware/recommend.py), on a GPU the device estimate
alone. The estimate assumes the attention each framework is taken to run: PyTorch's scaled_dot_product_attention
a fused kernel (log-sum-exp kept per row), the others the math path (T x T probabilities kept); the table names the
path it assumed. The ratio is measured / estimate. Called from the transformer study's report.
"""

from __future__ import annotations

from typing import Literal

from dlperf.core.result import CaseResult
from dlperf.report.sections import Note, Section, Table
from dlperf.report.study import ReportData
from dlperf.units import MISSING, format_mib

#: Frameworks whose transformer runs a fused attention kernel (the rest are estimated with the math path). jax is
#: not: its model calls jax.nn.dot_product_attention(implementation=None), which jax 0.10.2 always runs as XLA's
#: implementation (the T x T float32 logits materialised), not cuDNN's fused kernel.
FUSED_ATTENTION = frozenset({"torch"})
#: Frameworks whose kept activations the estimate has been checked against (tests/models/test_transformer_memory.py
#: counts PyTorch's saved tensors); for the others the table shows the measured peak and says why there is no
#: estimate, rather than a ratio that would blame the framework for the model's blind spot.
VALIDATED = frozenset({"torch"})
NOTE = ("estimate: models/transformer/memory.py (weights, gradients, AdamW's two states, autocast's weight copies, "
        "tokens, the activations each block keeps for backward, logits and the loss's fp32 log-softmax, the "
        "backward's largest transient; on a CPU plus the framework's measured footprint before the step was "
        "built). An ESTIMATE from the config alone: it counts every part alive at once (errs high: gradients grow as "
        "activations are freed) and leaves out allocator caching, workspaces and framework overheads (errs low)")


def attention_path(framework: str) -> Literal["fused", "math"]:
    """The attention path the estimate assumes for `framework`: "fused" or "math"."""
    return "fused" if framework in FUSED_ATTENTION else "math"


def estimate_bytes(r: CaseResult) -> tuple[int | None, str]:
    """(bytes, why none): the estimate comparable with `r.peak_memory()` for a training case of the transformer."""
    from dlperf.models.transformer.memory import train_memory
    from dlperf.workloads.transformer import TransformerParams

    try:
        p = TransformerParams.model_validate(r.params)
    except ValueError as exc:
        return None, f"parameters not understood ({str(exc).splitlines()[0]})"
    if p.task != "train" or p.seq_len is None:
        return None, f"task {p.task}: the estimate is of a training step"
    if r.framework not in VALIDATED:
        return None, (f"the estimate's activation count is checked against PyTorch's saved tensors only; "
                      f"{r.framework} keeps its own set (e.g. Keras' fp32 attention scores, its bf16 residual)")
    where = "host" if r.device == "cpu" else "device"
    est = train_memory(p.config(), p.batch, p.seq_len, precision=p.precision, attention=attention_path(r.framework),
                       where=where).total_bytes
    if where == "device":
        return est, ""
    base = r.m.baseline_rss_bytes
    if base is None:
        return None, "the framework's baseline RSS was not recorded"
    return est + int(base), ""


def train_cases(data: ReportData) -> list[CaseResult]:
    return [r for r in data.of("transformer") if r.params.get("task", "train") == "train"]


def rows(results: list[CaseResult]) -> tuple[list[str], list[list[str]]]:
    header = ["model", "framework", "device", "precision", "batch", "seq_len", "attention (assumed)", "status",
              "measured peak", "estimate", "measured / estimate"]
    out = []
    key = (lambda r: (r.params.get("model", ""), r.framework, r.device, r.params.get("precision", "fp32"),
                      r.params.get("seq_len") or 0, r.params.get("batch", 1), r.repetition))
    for r in sorted(results, key=key):
        measured, what = r.peak_memory()
        est, why = estimate_bytes(r)
        ratio = f"{measured / est:.2f}x" if r.ok and measured and est else MISSING  # a failed case never peaked
        shown_est = format_mib(est) if est else f"- ({why})"
        out.append([str(r.params.get("model")), r.framework, r.device, str(r.params.get("precision", "fp32")),
                    str(r.params.get("batch", 1)), str(r.params.get("seq_len")), attention_path(r.framework),
                    r.status, f"{format_mib(measured)} ({what})" if measured else what, shown_est, ratio])
    return header, out


def sections(data: ReportData) -> list[Section]:
    """The table of training cases (measured peak, estimate, ratio) and the note on what the estimate counts."""
    results = train_cases(data)
    if not results:
        return []
    header, table = rows(results)
    return [Table("transformer training: measured peak memory beside the memory model's estimate", header, table,
                  heading="## Transformer memory: measured and estimated",
                  intro="Peak memory of each training step as measured, beside an ESTIMATE from the config alone.",
                  text_cols=(8, 9)),
            Note(NOTE, markdown=NOTE[0].upper() + NOTE[1:] + ".")]
