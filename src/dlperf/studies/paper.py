"""The seed studies' published figures, transcribed into studies/reference/*.csv, and their loader.

Each CSV opens with `#` comment lines naming the seed file and the table, figure or sentence the
figures come from; the rows are the figures as printed (decimal commas converted). Only figures a
seed prints as numbers are here: a result it shows only as a picture has no row (the report says so).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class PaperTable:
    """One reference file: its citation (the header comment, as one paragraph) and its rows as printed."""

    name: str
    citation: str
    rows: tuple[dict[str, str], ...]

    def where(self, **match: str) -> list[dict[str, str]]:
        """The rows whose columns equal every `match` value."""
        return [r for r in self.rows if all(r.get(k) == v for k, v in match.items())]


def names() -> list[str]:
    """The reference files that ship (without .csv)."""
    folder = resources.files("dlperf.studies").joinpath("reference")
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".csv"))


@functools.cache
def load(name: str) -> PaperTable:
    """The reference file `name` (e.g. "study003_speedups"); KeyError names the files there are."""
    path = resources.files("dlperf.studies").joinpath("reference", f"{name}.csv")
    if not path.is_file():
        raise KeyError(f"no reference file {name!r} (there are: {', '.join(names())})")
    lines = path.read_text(encoding="utf-8").splitlines()
    comment = " ".join(line.lstrip("#").strip() for line in lines if line.startswith("#"))
    rows = tuple(csv.DictReader(line for line in lines if line and not line.startswith("#")))
    return PaperTable(name, comment, rows)
