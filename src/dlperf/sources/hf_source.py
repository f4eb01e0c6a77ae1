"""`hf:ARCH[,key=value...]` and `hf:PATH[,key=value...]`: a Hugging Face `transformers` model from its config.

ARCH is a `model_type` (bert, gpt2, llama, vit, ...), built from `AutoConfig.for_model(ARCH)`; PATH a local
folder holding `config.json` (`AutoConfig.from_pretrained(PATH, local_files_only=True)`: JSON only). `key=value`
overrides config fields (ints, floats, true/false, else text); a key the config does not have is an error, not
ignored. Weights are random (`from_config`): no weights, no tokenizer, nothing downloaded; `load` sets
HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 before importing transformers.

The class and the task follow the architecture: a causal LM (in transformers' causal-LM mapping and not in its
masked-LM one: gpt2, llama, ...) is built with its LM head (`AutoModelForCausalLM`) and runs infer, train and
generate; any other (bert, vit, ...) is the base model (`AutoModel`) and runs infer and train. Inputs follow the
model's `main_input_name`: token ids [batch, seq] below the vocabulary (and an attention mask of ones), or pixel
values [batch, channels, image_size, image_size] drawn from a seeded normal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dlperf.sources.base import Loaded, SourceError, SourceKind, canonical_path

PREFIX = "hf:"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


#: An override's value as `_value` reads it: true/false, an int, a float, else the text.
Override = bool | int | float | str


def parse(text: str) -> tuple[str, dict[str, Override]]:
    """`hf:WHAT,k=v,...` -> (WHAT, {k: v}); SourceError on a malformed override."""
    what, *pairs = text[len(PREFIX):].split(",")
    if not what:
        raise SourceError(f"{text}: expected hf:ARCH or hf:PATH (e.g. hf:bert,num_hidden_layers=2)")
    overrides: dict[str, Override] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip().isidentifier():
            raise SourceError(f"{text}: {pair!r} is not key=value")
        overrides[key.strip()] = _value(raw.strip())
    return what, overrides


def _value(raw: str) -> Override:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def _is_count(key: str, default: object) -> bool:
    """A config field that counts or sizes something (layers, heads, widths, the vocabulary): its default a
    positive int and its name one of transformers' spellings of a count or a size."""
    named = key.startswith(("num_", "n_")) or key.endswith(("_size", "_layers", "_heads", "_dim", "_embd"))
    return named and type(default) is int and default > 0


def _set(cfg: Any, text: str, key: str, value: Override) -> None:
    """`cfg.key = value`, or SourceError: a count or size below 1 (transformers builds a model of no layers from
    -1 and dlperf would time it), or a value the config refuses (its validation error's first line)."""
    if _is_count(key, getattr(cfg, key, None)) and not (type(value) is int and value >= 1):
        raise SourceError(f"{text}: {key} is a count or size: a positive integer, not {value!r}")
    try:
        setattr(cfg, key, value)
    except Exception as exc:  # transformers' strict configs raise their own validation errors
        why = " ".join(str(exc).split())[:200]
        raise SourceError(f"{text}: {key} cannot be {value!r} ({why})") from None


def is_path(what: str) -> bool:
    return "/" in what or what.startswith(".") or Path(what).is_dir()


class HfSource(SourceKind):
    name = "hf"
    form = "hf:ARCH[,key=value...] | hf:PATH"

    def matches(self, text: str) -> bool:
        return text.startswith(PREFIX)

    def canonical(self, text: str) -> str:
        """A folder's path as `canonical_path` spells it (with `./` where that leaves no slash, so it stays a
        path, not an architecture's name); an architecture's text as given."""
        what, *rest = text[len(PREFIX):].split(",")
        if not is_path(what):
            return text
        path = canonical_path(what)
        return ",".join([PREFIX + (path if "/" in path else f"./{path}"), *rest])

    def check_text(self, text: str) -> None:
        what, _ = parse(text)
        if is_path(what):
            cfg = Path(what) / "config.json"
            if not cfg.is_file():
                raise SourceError(f"{text}: {what} has no config.json (hf:PATH is a folder with one)")
            try:
                json.loads(cfg.read_text())
            except (OSError, ValueError) as exc:
                raise SourceError(f"{text}: {cfg} is not JSON ({exc})") from None

    def config(self, text: str) -> Any:
        """The config the model is built from, overrides applied (SourceError for an unknown arch or key)."""
        os.environ.update(OFFLINE)
        try:
            import transformers
        except ImportError:
            raise SourceError(f"{text}: transformers is not installed (pip install 'dlperf[hf]')") from None
        what, overrides = parse(text)
        self.check_text(text)
        try:
            if is_path(what):
                cfg = transformers.AutoConfig.from_pretrained(what, local_files_only=True)
            else:
                cfg = transformers.AutoConfig.for_model(what)
        except (ValueError, KeyError, OSError) as exc:
            raise SourceError(f"{text}: unknown architecture {what!r} ({str(exc).splitlines()[0][:120]})") from None
        known = set(cfg.to_dict()) | set(getattr(type(cfg), "attribute_map", {}))
        for key, value in overrides.items():
            if key not in known:
                import difflib

                near = difflib.get_close_matches(key, sorted(known), n=3)
                raise SourceError(f"{text}: {type(cfg).__name__} has no field {key!r}"
                                  + (f" (did you mean {', '.join(near)}?)" if near else ""))
            _set(cfg, text, key, value)
        return cfg

    def load(self, text: str, seed: int) -> Loaded:
        import torch

        cfg = self.config(text)  # first: its SourceError names a missing transformers
        import transformers
        from transformers.models.auto import modeling_auto as ma

        causal = (cfg.model_type in ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
                  and cfg.model_type not in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        torch.manual_seed(seed)
        try:
            model = auto.from_config(cfg)
        except (ValueError, KeyError) as exc:
            raise SourceError(f"{text}: transformers cannot build it: {str(exc).splitlines()[0][:200]}") from None
        main = getattr(model, "main_input_name", "input_ids")
        vocab = getattr(cfg, "vocab_size", None)

        def inputs(batch: int, seq: int | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
            gen = torch.Generator().manual_seed(0)
            if main == "pixel_values":
                side, ch = int(getattr(cfg, "image_size", 224)), int(getattr(cfg, "num_channels", 3))
                return (), {"pixel_values": torch.randn(batch, ch, side, side, generator=gen)}
            if main != "input_ids" or vocab is None:
                raise SourceError(f"{text}: dlperf makes inputs for token or image models, not {main!r}; give "
                                  "--input or --inputs")
            length = seq or 32
            ids = torch.randint(0, int(vocab), (batch, length), generator=gen)
            return (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

        return Loaded(model, inputs, tasks=("infer", "train", "generate") if causal else ("infer", "train"),
                      vocab_size=int(vocab) if causal and vocab else None,
                      info={"family": "hf", "class": type(model).__name__, "model_type": cfg.model_type})
