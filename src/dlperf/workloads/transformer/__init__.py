"""`transformer`: a decoder (GPT-2 shape) or encoder (BERT shape) training step, forward pass, or greedy generation.

Tasks:
- `train`: one AdamW step on `batch` sequences of `seq_len` tokens (decoder: next-token loss over every position;
  encoder: classification of each sequence). Samples are tokens, so samples/s is tokens/s.
- `infer`: one forward pass of the same (logits); samples are tokens.
- `generate` (decoder): greedy decoding of `new_tokens` tokens after a `prompt_len`-token prompt, with a KV cache
  or without one (the whole sequence again per token). Timed call by call (`per_call_timing`); each call also
  records its own time to first token and decode time (`Step.call_phases`). Samples are generated tokens.
Weights are random (`models.transformer.config.init_weights`), tokens drawn from a seeded generator, all made
on the device before timing. Precision: fp32, or bf16/fp16 autocast (mixed precision) where the device has it
(a combination the framework cannot run ends `unsupported` with the reason). The FLOPs convention is
`models.transformer.cost`'s. In every framework the KV cache is allocated once per case, outside the timed calls
(or in the first, excluded call), and reused by every timed call. The builders are the `<family>_transformer`
modules beside this one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dlperf.frameworks import Framework
from dlperf.models.transformer import PRESETS, TransformerConfig, get_config
from dlperf.models.transformer import cost as tcost
from dlperf.workloads import xla_compile
from dlperf.workloads.base import Cost, Step, Workload, WorkloadParams

#: The dtype each precision's peak is read for (MFU): autocast runs the matrix products in it.
PRECISION_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: Settings that belong to one task: (that task, the default it gets there); refused on any other task.
TASK_DEFAULTS: dict[str, tuple[str, Any]] = {"kv_cache": ("generate", True), "lr": ("train", 1e-4),
                                             "weight_decay": ("train", 0.01)}


class TransformerParams(WorkloadParams):
    model: str = Field(description=f"a preset: {', '.join(PRESETS)}")
    task: Literal["train", "infer", "generate"] = "train"
    batch: int = Field(default=1, gt=0, description="sequences per step")
    seq_len: int | None = Field(default=None, gt=0, description="train/infer: tokens per sequence")
    prompt_len: int | None = Field(default=None, gt=0, description="generate: prompt tokens")
    new_tokens: int | None = Field(default=None, gt=0, description="generate: tokens generated per call")
    kv_cache: bool | None = Field(default=None, description="generate: keep keys and values of earlier tokens "
                                                            "(default true)")
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    # overrides of the preset's shape (so a sweep can vary one of them)
    n_layer: int | None = Field(default=None, gt=0)
    d_model: int | None = Field(default=None, gt=0)
    n_head: int | None = Field(default=None, gt=0)
    vocab_size: int | None = Field(default=None, gt=0)
    max_positions: int | None = Field(default=None, gt=0)
    lr: float | None = Field(default=None, gt=0, description="train: AdamW learning rate (default 1e-4)")
    weight_decay: float | None = Field(default=None, ge=0, description="train: AdamW weight decay (default 0.01)")

    @model_validator(mode="before")
    @classmethod
    def _task_defaults(cls, data: Any) -> Any:
        """Fill the defaults of the task's own settings, and refuse another task's: a case key then names only
        what the case uses (no kv_cache on a training step, no learning rate on generation)."""
        if not isinstance(data, dict):
            return data
        task = data.get("task", "train")
        out = dict(data)
        for key, (owner, default) in TASK_DEFAULTS.items():
            if task == owner:
                out.setdefault(key, default)
                if out[key] is None:
                    out[key] = default
            elif out.get(key) is not None:
                raise ValueError(f"{key} applies to task {owner}, not {task}")
        return out

    @model_validator(mode="after")
    def _consistent(self) -> TransformerParams:
        if self.model not in PRESETS:
            raise ValueError(f"unknown transformer {self.model!r} (known: {', '.join(PRESETS)})")
        cfg = self.config()
        if self.task == "generate":
            if cfg.kind != "decoder":
                raise ValueError(f"{self.model} is an encoder: it classifies, it does not generate")
            if self.prompt_len is None or self.new_tokens is None:
                raise ValueError("task generate needs prompt_len and new_tokens")
            if self.seq_len is not None:
                raise ValueError("task generate takes prompt_len and new_tokens, not seq_len")
            if self.prompt_len + self.new_tokens > cfg.max_positions:
                raise ValueError(f"prompt_len + new_tokens = {self.prompt_len + self.new_tokens} exceeds the "
                                 f"context of {cfg.max_positions}")
        else:
            if self.seq_len is None:
                raise ValueError(f"task {self.task} needs seq_len")
            if self.prompt_len is not None or self.new_tokens is not None:
                raise ValueError(f"task {self.task} takes seq_len, not prompt_len/new_tokens")
            if self.seq_len > cfg.max_positions:
                raise ValueError(f"seq_len {self.seq_len} exceeds the context of {cfg.max_positions}")
        return self

    def config(self) -> TransformerConfig:
        return get_config(self.model, n_layer=self.n_layer, d_model=self.d_model, n_head=self.n_head,
                          vocab_size=self.vocab_size, max_positions=self.max_positions)

    @property
    def dtype(self) -> str:
        """The dtype of the matrix products (the peak MFU is taken against)."""
        return PRECISION_DTYPE[self.precision]


class Transformer(Workload[TransformerParams]):
    name = "transformer"
    description = "transformer (GPT-2/BERT shapes) training step, forward pass, greedy generation with/without KV cache"
    Params = TransformerParams
    #: After an out-of-memory batch, the larger batches of the same series are not run (and maxbatch searches it).
    memory_axis = "batch"
    #: Cost.samples are tokens (train, infer: batch x seq_len; generate: batch x new_tokens).
    sample_unit = "token"

    def cost(self, params: TransformerParams) -> Cost:
        cfg, b = params.config(), params.batch
        if params.task == "generate":
            assert params.prompt_len is not None and params.new_tokens is not None
            return Cost(flops=tcost.generate_flops(cfg, b, params.prompt_len, params.new_tokens, bool(params.kv_cache)),
                        samples=b * params.new_tokens)
        assert params.seq_len is not None
        flops = (tcost.train_flops if params.task == "train" else tcost.forward_flops)(cfg, b, params.seq_len)
        return Cost(flops=flops, samples=b * params.seq_len)

    def per_call_timing(self, params: TransformerParams) -> bool:
        """Generation is timed call by call (block 1): its tails are the point, and averaging hides them."""
        return params.task == "generate"

    def build(self, fw: Framework, device: str, params: TransformerParams) -> Step:
        """The builder's step; an XLA mode's with its compiler cache (`xla_compile`: cold and warm compile)."""
        return xla_compile.build(self, fw, device, params)

    def extra_metrics(self, params: TransformerParams, step: Step) -> dict[str, Any]:
        """An XLA mode's cold and warm compile (`xla_compile.record`)."""
        return dict(xla_compile.record(step))


__all__ = ["PRECISION_DTYPE", "TASK_DEFAULTS", "Transformer", "TransformerParams"]
