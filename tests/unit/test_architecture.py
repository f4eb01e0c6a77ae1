"""The house's shape, checked: arrows point down the layers, no package imports in a circle, files stay small.

Every `import dlperf.X` / `from dlperf.X import` in src/dlperf, at module level or inside a function
(a function-level import is still an arrow), is read with `ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "dlperf"

#: Each top-level part of dlperf and its layer: a part may import parts of its own layer or lower ones.
LAYERS: dict[str, int] = {
    "errors": 0, "units": 0, "untrusted": 0,
    "timing": 1, "__init__": 1,  # the package root re-exports dlperf.measure
    "core": 2,
    "meters": 3, "store": 3, "frameworks": 3, "nn": 3, "profiling": 3,
    "models": 4, "workloads": 4, "serving": 4,  # serving: LoadGen over a built step (`Serve.drive` calls it)
    "sources": 4,  # where a user's model comes from (`dlperf bench SOURCE`); the model workload loads one
    "distributed": 4,  # torchrun jobs: the `ddp` and `collectives` workloads' `drive` calls it
    "hardware": 5, "studies": 5,
    "runner": 6, "fleet": 6,  # fleet: the runner's cases sent to Dask workers on other machines
    "report": 7,
    "cli": 8, "doctor": 8, "__main__": 8,
}
MAX_LINES = 400


def _part(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dlperf part) of every dlperf import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "dlperf" else [f"dlperf.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "dlperf" and len(parts) > 1:
                out.append((node.lineno, parts[1]))
    return out


SOURCES = sorted(SRC.rglob("*.py"))


def test_every_part_has_a_layer() -> None:
    parts = {_part(p) for p in SOURCES}
    assert parts <= set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_arrow_points_up() -> None:
    upward = []
    for path in SOURCES:
        mine = _part(path)
        for line, other in _imports(path):
            if mine in LAYERS and other in LAYERS and LAYERS[other] > LAYERS[mine]:
                upward.append(f"{path.relative_to(SRC)}:{line} ({mine}) imports {other}")
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_package_imports_in_a_circle() -> None:
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        mine = _part(path)
        graph.setdefault(mine, set()).update(o for _, o in _imports(path) if o != mine)

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += graph.get(node, ())
        return seen

    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a in reach(b) and a < b)
    assert not circles, f"parts that import each other (directly or through others): {circles}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_is_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(SRC)} has {lines} lines: split it by job"
