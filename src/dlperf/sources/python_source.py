"""Python sources: `path/to/file.py:NAME` and `package.module:NAME`, a torch.nn.Module or a callable returning one.

The file is imported in the worker (its top level runs there: a user's file is code), as a module of its own
name, never installed anywhere. Beside the model, the file may define `loss(outputs, batch)` (the training loss)
and the module an `example_inputs(batch)` method (its inputs, when no --input is given).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from dlperf.sources.base import Loaded, SourceError, SourceKind, as_module, canonical_path, split_ref


def _from_namespace(torch: Any, ns: Any, name: str, what: str, seed: int) -> Loaded:
    if not hasattr(ns, name):
        known = sorted(n for n in vars(ns) if not n.startswith("_"))
        raise SourceError(f"{what}: no name {name!r} there (it defines: {', '.join(known[:12]) or 'nothing'})")
    torch.manual_seed(seed)
    module = as_module(torch, getattr(ns, name), what)
    loss = getattr(ns, "loss", None)
    example = getattr(module, "example_inputs", None)

    def inputs(batch: int, seq: int | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        assert example is not None
        return split_inputs(example(batch))

    return Loaded(module, inputs if callable(example) else None, loss=loss if callable(loss) else None)


def split_inputs(value: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A user's inputs (a tensor, a tuple/list or a dict) as (args, kwargs) of a forward call."""
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    return (value,), {}


def import_file(path: Path, what: str) -> Any:
    """Import the file at `path` as a fresh module (SourceError when its top level raises)."""
    mod_name = "dlperf_user_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise SourceError(f"{what}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise SourceError(f"{what}: importing it raised {type(exc).__name__}: {_line(exc)}") from None
    return module


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


class FileSource(SourceKind):
    name = "file"
    form = "path/to/file.py:NAME"

    def matches(self, text: str) -> bool:
        return ".py:" in text

    def canonical(self, text: str) -> str:
        where, name = split_ref(text)
        return f"{canonical_path(where)}:{name}"

    def check_text(self, text: str) -> None:
        where, _ = split_ref(text)
        path = Path(where)
        if not path.is_file():
            raise SourceError(f"{text}: no such file {where}")

    def load(self, text: str, seed: int) -> Loaded:
        import torch

        where, name = split_ref(text)
        self.check_text(text)
        return _from_namespace(torch, import_file(Path(where).resolve(), where), name, text, seed)


class ModuleSource(SourceKind):
    name = "module"
    form = "package.module:NAME"

    def matches(self, text: str) -> bool:
        return re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", text) is not None

    def check_text(self, text: str) -> None:
        where, _ = split_ref(text)
        if importlib.util.find_spec(where.split(".")[0]) is None:
            raise SourceError(f"{text}: no module named {where.split('.')[0]!r} on the Python path")

    def load(self, text: str, seed: int) -> Loaded:
        import torch

        where, name = split_ref(text)
        try:
            ns = importlib.import_module(where)
        except Exception as exc:
            raise SourceError(f"{text}: importing {where} raised {type(exc).__name__}: {_line(exc)}") from None
        return _from_namespace(torch, ns, name, text, seed)
