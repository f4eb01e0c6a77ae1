"""`dlperf:NAME`: one of dlperf's own models, so every example runs with nothing from the user.

CNNs (alexnet, caffenet, googlenet, lenet5: NCHW float32 images of the model's size, `models.torch_models`),
transformer presets (gpt2-tiny, bert-tiny, ...: int64 tokens [batch, seq] below the vocabulary, the logits
forward of `models.transformer.torch_model`; a decoder also generates) and study 000's two-layer net at its three
sizes (mlp-small, mlp-medium, mlp-large: `Linear(D_in, H) -> ReLU -> Linear(H, D_out)` without biases, the sizes
of `models.mlp_sizes.SIZES`, float32 inputs [batch, D_in]; the batch is bench's, not the table's N).
"""

from __future__ import annotations

from typing import Any

from dlperf.models.mlp_sizes import SIZES
from dlperf.sources.base import Loaded, SourceError, SourceKind

PREFIX = "dlperf:"


#: Study 000's net, by size (`models.mlp_sizes.SIZES`).
MLPS = ("mlp-small", "mlp-medium", "mlp-large")


def _names() -> tuple[list[str], list[str]]:
    from dlperf.models import MODELS
    from dlperf.models.transformer import PRESETS

    return sorted(MODELS), [*PRESETS, *MLPS]


class DlperfSource(SourceKind):
    name = "dlperf"
    form = "dlperf:NAME"

    def matches(self, text: str) -> bool:
        return text.startswith(PREFIX)

    def check_text(self, text: str) -> None:
        cnns, transformers = _names()
        if text[len(PREFIX):] not in (*cnns, *transformers):
            raise SourceError(f"{text}: no such dlperf model (known: {', '.join(cnns + transformers)})")

    def load(self, text: str, seed: int) -> Loaded:
        import torch

        self.check_text(text)
        name = text[len(PREFIX):]
        cnns, _ = _names()
        if name in cnns:
            return _cnn(torch, name, seed)
        if name in MLPS:
            return _mlp(torch, name, seed)
        return _transformer(torch, name, seed)


def _mlp(torch: Any, name: str, seed: int) -> Loaded:
    _, d_in, hidden, d_out = SIZES[name.removeprefix("mlp-")]
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(d_in, hidden, bias=False), torch.nn.ReLU(),
                              torch.nn.Linear(hidden, d_out, bias=False))

    def inputs(batch: int, seq: int | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (torch.randn(batch, d_in, generator=torch.Generator().manual_seed(0)),), {}

    return Loaded(net, inputs, info={"family": "mlp", "study": "000", "dims": [d_in, hidden, d_out]})


def _cnn(torch: Any, name: str, seed: int) -> Loaded:
    from dlperf.models import get_spec, torch_models

    spec = get_spec(name)
    torch.manual_seed(seed)
    net = torch_models.build(spec)

    def inputs(batch: int, seq: int | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        gen = torch.Generator().manual_seed(0)
        side = spec.image_size
        return (torch.randn(batch, spec.in_channels, side, side, generator=gen),), {}

    return Loaded(net, inputs, info={"family": "cnn"})


def _transformer(torch: Any, name: str, seed: int) -> Loaded:
    from dlperf.models.onnx_export import transformer_module
    from dlperf.models.transformer import get_config, make_tokens

    cfg = get_config(name)
    net = transformer_module(cfg, seed)

    def inputs(batch: int, seq: int | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        length = seq or min(32, cfg.max_positions)
        if length > cfg.max_positions:
            raise ValueError(f"--seq {length} exceeds {name}'s context of {cfg.max_positions}")
        return (torch.as_tensor(make_tokens(cfg, batch, length)),), {}

    decoder = cfg.kind == "decoder"
    return Loaded(net, inputs, tasks=("infer", "train", "generate") if decoder else ("infer", "train"),
                  vocab_size=cfg.vocab_size if decoder else None, info={"family": "transformer"})
