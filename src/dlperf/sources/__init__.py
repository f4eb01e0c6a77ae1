"""Sources: where a model comes from (`dlperf bench SOURCE`, a study's `source:`), one module per kind.

The kind of a text is the first in `KINDS` that matches it: `dlperf:NAME`, `hf:...`, `FILE.onnx`,
`path/to/file.py:NAME`, `package.module:NAME`. See `base` for what is checked where, and the kinds' modules.
"""

from __future__ import annotations

from dlperf.sources.base import TASKS, Loaded, SourceError, SourceInfo, SourceKind
from dlperf.sources.dlperf_source import DlperfSource
from dlperf.sources.hf_source import HfSource
from dlperf.sources.onnx_source import OnnxSource
from dlperf.sources.python_source import FileSource, ModuleSource

#: The kinds, in the order a text is matched against them.
KINDS: dict[str, type[SourceKind]] = {k.name: k for k in (DlperfSource, HfSource, OnnxSource, FileSource,
                                                          ModuleSource)}


def kind_of(text: str) -> SourceKind:
    """The kind that takes `text` (SourceError naming the forms when none does)."""
    for cls in KINDS.values():
        kind = cls()
        if kind.matches(text):
            return kind
    raise SourceError(f"{text!r} is not a source: give one of {' | '.join(c.form for c in KINDS.values())}")


def check_text(text: str) -> SourceKind:
    """The kind of `text`, after its cheap check (nothing imported or run)."""
    kind = kind_of(text)
    kind.check_text(text)
    return kind


def canonical(text: str) -> str:
    """`text`'s one spelling (`SourceKind.canonical`): a file or folder named two ways is one source."""
    return kind_of(text).canonical(text)


def load(text: str, seed: int = 0) -> Loaded:
    """The model of `text`, built in this process (a worker: a user's file runs here)."""
    return check_text(text).load(text, seed)


__all__ = ["KINDS", "TASKS", "Loaded", "SourceError", "SourceInfo", "SourceKind", "canonical", "check_text", "kind_of",
           "load"]
