"""dlperf's own models on TensorFlow and JAX: the shipped workloads' builds of the same model (its twin), given the
torch source's weights and inputs, so that a TensorFlow or JAX path computes the torch reference's function and is
gated against it (`tensorflow_model`, `jax_model` build the steps; this module is what they share).

- Twins: `dlperf:lenet5|alexnet|...` -> the cnn workload's Keras model (TensorFlow only: dlperf has no JAX CNN),
  the torch net's weights copied in (`models.tensorflow_models.copy_from_torch`), its NCHW inputs as NHWC;
  `dlperf:gpt2-tiny|...` -> the transformer workload's Keras or Flax model with the torch module's weights (the
  source builds it from `init_weights(cfg, seed)`: the same arrays here) and the same tokens; `dlperf:mlp-*` ->
  study 000's net (the mlp workload's two products and ReLU, without biases) on the torch Linear layers' weights
  and inputs. Any other source has no twin: `unsupported`, said why.
- Modes: the case's variant picks the adapter (`variants.MODE_ADAPTERS`); a worker is given it (`Model.adapter`),
  a direct `Model.build` with the family's plain adapter swaps it (`modes.mode_adapter`); which case has a twin,
  and why another has none, is `modes.check`'s.
- infer: the reference is the torch source's eager fp32 forward, run twice in this process (`torch_reference`);
  the gate judges the path's last output against it after the timing; FLOPs per call are torch's count of that
  forward (every path's figure). train, generate: the twin's own step (the transformer workload's AdamW training
  step and greedy generation with its KV cache), FLOPs from its cost model; their correctness is `not checked`
  (another optimiser, another prompt than torch's step), the forward being checked by task infer.
- Precision fp32 only: dlperf has no TensorFlow or JAX int8 quantizer, and their mixed precision is the transformer
  workload's (`unsupported` with the reason).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlperf.frameworks import Framework
from dlperf.models.transformer import config as tconfig
from dlperf.models.transformer import get_config, init_weights
from dlperf.sources.dlperf_source import PREFIX
from dlperf.workloads.base import Step
from dlperf.workloads.model import ModelParams, gate
from dlperf.workloads.model import prepare as prep
from dlperf.workloads.model.gate import Verdict
from dlperf.workloads.model.modes import check
from dlperf.workloads.model.records import ModelInfo
from dlperf.workloads.model.step import ModelStep
from dlperf.workloads.model.variants import EAGER
from dlperf.workloads.transformer import Transformer, TransformerParams

#: Why a train or generate path is not gated.
NOT_GATED = {"train": "{fw}'s training step is the transformer workload's (AdamW, lr 1e-4), not torch's SGD step: "
                      "another function; the forward is checked by task infer",
             "generate": "{fw}'s generation is the transformer workload's (its prompt from make_tokens, not "
                         "torch's): another input; the forward is checked by task infer"}


def seed_of(fw: Framework) -> int:
    """The case's seed (0 where none was set: the seed torch's path and the export use then too)."""
    value = fw.seed_value()
    return 0 if value is None else int(value)


def base_info(p: ModelParams) -> ModelInfo:
    """The figures every twin step records: the source, the dtype its peak is read for, a variant but eager."""
    info: ModelInfo = {"source": p.source, "mfu_dtype": p.dtype}
    if p.variant != EAGER:
        info["variant"] = p.variant
    return info


@dataclass
class Reference:
    """The torch source in this process: its eager module (fp32, eval), inputs, reference outputs, whether they
    agreed with a second run, FLOPs per forward and parameter count."""

    loaded: Any
    args: tuple[Any, ...]
    outputs: list[np.ndarray]
    verdict: Verdict | None
    flops: float | None
    params: int

    @property
    def module(self) -> Any:
        return self.loaded.module


def torch_reference(p: ModelParams, seed: int) -> Reference:
    """The torch source's eager fp32 forward on its seeded inputs, twice (`gate.self_check`), with its FLOPs."""
    import torch

    pr = prep.prepare(torch, p.model_copy(update={"variant": "eager"}), seed)
    net = pr.module.eval()

    def forward() -> Any:
        with torch.inference_mode():
            return net(*pr.args, **pr.kwargs)

    first, second = prep.as_numpy(torch, forward()), prep.as_numpy(torch, forward())
    return Reference(pr.loaded, pr.args, first, gate.self_check(first, second), prep.count_flops(torch, forward),
                     prep.param_count(net))


def gate_of(ref: Reference, outputs: Any) -> Any:
    """The gate: the path's last outputs (`outputs()`, float64 arrays) against the torch reference's."""

    def checked() -> Verdict:
        if ref.verdict is not None:
            return ref.verdict
        return gate.judge([np.asarray(o, dtype=np.float64) for o in outputs()], ref.outputs, "fp32")

    return checked


def not_gated(framework: str, task: str) -> Verdict:
    return gate.not_checked(NOT_GATED[task].format(fw=framework))


def transformer_params(p: ModelParams) -> TransformerParams:
    """The transformer workload's params of the case (the preset, its task at the case's batch and lengths)."""
    name = p.source[len(PREFIX):]
    if p.task == "generate":
        prompt_len, new = p.generation()
        return TransformerParams(model=name, task="generate", batch=p.batch, prompt_len=prompt_len, new_tokens=new)
    length = p.seq or min(32, get_config(name).max_positions)
    return TransformerParams(model=name, task=p.task, batch=p.batch, seq_len=length)


def transformer_step(framework: str, build: Callable[[TransformerParams, dict[str, np.ndarray]], Step],
                     p: ModelParams, seed: int, info: ModelInfo) -> ModelStep:
    """A transformer twin's step (`build`: the family's transformer builder on the preset's params and the torch
    source's weights), with the model's figures: infer gated against the torch reference and its FLOPs torch's
    count; train and generate `not checked` (`NOT_GATED`), their FLOPs the transformer workload's cost model."""
    tp = transformer_params(p)
    ref = torch_reference(p, seed) if p.task == "infer" else None
    step = build(tp, transformer_weights(p, seed))
    if ref is not None:
        info |= {"param_count": ref.params, "model_info": ref.loaded.info, "flops_per_call": ref.flops}
        checked = gate_of(ref, lambda: [step.result()] if step.result else [])
    else:
        flops, params = transformer_figures(tp)
        info |= {"param_count": params, "model_info": {"family": "transformer"}, "flops_per_call": flops}
        why = not_gated(framework, p.task)
        checked = lambda: why
    if p.task == "generate":
        info |= {"prompt_len": tp.prompt_len or 0, "new_tokens": tp.new_tokens or 0}
    return ModelStep(step.fn, step.result, call_phases=step.call_phases, predict=step.predict,
                     info=info | {"gate": checked})


def transformer_figures(tp: TransformerParams) -> tuple[float, int]:
    """(FLOPs per call by the transformer workload's cost model, parameter count) of a train or generate case."""
    flops = Transformer().cost(tp).flops
    return float(flops or 0.0), tconfig.param_count(tp.config())


def transformer_weights(p: ModelParams, seed: int) -> dict[str, np.ndarray]:
    """The torch source's weights: it builds its module from `init_weights(cfg, seed)` (`sources.dlperf_source`),
    so the same canonical arrays, made here without torch (infer's gate would catch any other)."""
    return init_weights(get_config(p.source[len(PREFIX):]), seed)


def mlp_weights(ref: Reference) -> tuple[np.ndarray, np.ndarray]:
    """Study 000's (w1, w2) as x @ w1 -> ReLU -> @ w2 multiplies them: the torch Linear weights, transposed."""
    first, second = ref.module[0].weight, ref.module[2].weight
    return (np.ascontiguousarray(first.detach().cpu().numpy().T),
            np.ascontiguousarray(second.detach().cpu().numpy().T))


def first_input(ref: Reference) -> np.ndarray:
    return np.asarray(ref.args[0].detach().cpu().numpy())


__all__ = ["NOT_GATED", "Reference", "base_info", "check", "first_input", "gate_of", "mlp_weights", "not_gated",
           "seed_of", "torch_reference", "transformer_figures", "transformer_params", "transformer_step",
           "transformer_weights"]
