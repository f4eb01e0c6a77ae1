"""What every source kind shares: the loaded model, its error, and the kind's interface.

A source names where a model comes from (`dlperf bench SOURCE`, a study's `source:`). `SourceKind.check_text` looks
at the text only (a file that exists, a name that parses: nothing imported, nothing run) and is called before any
worker starts; `load` builds the model in a worker (it imports torch, and a user's file runs there: a user's file
is code). Nothing is ever unpickled: weights are random (a factory's own initialisation after `torch.manual_seed`,
or a Hugging Face config's `from_config`), never read from a checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

from dlperf.errors import DlperfError

#: Tasks a model may be run for.
TASKS = ("infer", "train", "generate")


class SourceError(DlperfError):
    """A source that cannot be used, decided before anything is measured (one line, exit 2)."""


#: What a loaded model says of itself (`Loaded.info`, stored as a case's `model_info`): its family, and per family
#: the MLP's study and widths, or a Hugging Face model's class and `model_type` ("class" is why this is not the
#: class form of TypedDict).
SourceInfo = TypedDict("SourceInfo", {"family": str, "study": str, "dims": list[int], "class": str,
                                      "model_type": str}, total=False)


@dataclass
class Loaded:
    """A model built from a source in the worker: the torch module and what it says of itself."""

    module: Any
    #: (batch, seq) -> (args, kwargs) of one forward call, seeded; None: the inputs must be given (--input).
    example_inputs: Callable[[int, int | None], tuple[tuple[Any, ...], dict[str, Any]]] | None = None
    #: The tasks it runs (an encoder does not generate).
    tasks: tuple[str, ...] = ("infer", "train")
    #: The user's `loss(outputs, batch)`, or None for the documented default (`workloads.model.torch_model`).
    loss: Callable[[Any, Any], Any] | None = None
    #: A causal LM's vocabulary (generation draws prompts below it), else None.
    vocab_size: int | None = None
    info: SourceInfo = field(default_factory=lambda: SourceInfo())


class SourceKind:
    """One kind of source: which texts it takes, a cheap check of one, and how a worker loads one."""

    name: ClassVar[str] = ""
    #: What a text of this kind looks like (for help and errors).
    form: ClassVar[str] = ""

    def matches(self, text: str) -> bool:
        raise NotImplementedError(f"{type(self).__name__} does not say which sources it takes")

    def check_text(self, text: str) -> None:
        """SourceError when `text` cannot be a source of this kind (nothing imported or run)."""
        raise NotImplementedError(f"{type(self).__name__} has no text check")

    def load(self, text: str, seed: int) -> Loaded:
        """The model, built in the worker with `torch.manual_seed(seed)` first."""
        raise NotImplementedError(f"{type(self).__name__} cannot be loaded into torch")

    def canonical(self, text: str) -> str:
        """One spelling of `text` for what it names (a kind with a file: `canonical_path`'s), so that `./m.onnx`
        and `/here/m.onnx` are one source to the store, `compare` and `history`."""
        return text


def canonical_path(where: str) -> str:
    """A path's one spelling from this directory: the file it resolves to (symbolic links and `..` followed, as
    the system follows them), relative when that lies below the resolved working directory (`./a/../m.onnx` ->
    `m.onnx`), else absolute. A relative spelling names a file relative to where dlperf runs, as before."""
    full = os.path.realpath(where)
    rel = os.path.relpath(full, os.path.realpath(os.getcwd()))
    return full if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def split_ref(text: str) -> tuple[str, str]:
    """`WHERE:NAME` -> (WHERE, NAME), split at the last colon; SourceError when either is empty."""
    where, sep, name = text.rpartition(":")
    if not sep or not where or not name or not name.isidentifier():
        raise SourceError(f"{text!r}: expected WHERE:NAME (path/to/file.py:build, package.module:Net), NAME a "
                          "Python identifier")
    return where, name


def as_module(torch: Any, obj: Any, what: str) -> Any:
    """`obj` if it is a torch.nn.Module, else `obj()` if callable and that returns one; SourceError otherwise."""
    if isinstance(obj, torch.nn.Module):
        return obj
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module) or callable(obj):
        made = called(obj, f"{what}: calling it")
        if isinstance(made, torch.nn.Module):
            return made
        raise SourceError(f"{what}: returned a {type(made).__name__}, not a torch.nn.Module")
    raise SourceError(f"{what}: is a {type(obj).__name__}, neither a torch.nn.Module nor a callable returning one")


def called(fn: Callable[..., Any], what: str, *args: Any) -> Any:
    """`fn(*args)`, or SourceError `WHAT raised TYPE: its first line` for anything the user's code raises (a
    SourceError, dlperf's own, passes as it is): one line naming the call, not a bare exception."""
    try:
        return fn(*args)
    except SourceError:
        raise
    except Exception as exc:
        raise SourceError(f"{what} raised {type(exc).__name__}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
