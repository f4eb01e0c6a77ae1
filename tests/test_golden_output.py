"""Every figure printed before the issue-12 reshaping is printed the same after it.

`tests/golden/` holds a store of real runs (ops, peaks, mlp, backends, cnn with kernel profiles, every
failure status, a maxbatch search) and what dlperf at commit c0de3e7 printed for them with `show`,
`report` (terminal and Markdown), `export` (CSV and JSON), `runs` and `compare`. Text outputs must be
identical; JSON exports must hold the same data (key order may differ, and columns a later schema
adds to a run are named in ADDED_RUN_KEYS).
"""

from __future__ import annotations

import json

import pytest

from tests.golden.render import OUTPUTS, commands, render_all

#: Run-table columns added after the golden store was written (schema migrations), not in its outputs.
ADDED_RUN_KEYS: tuple[str, ...] = ()


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_all()


def _json(text: str) -> dict:
    data = json.loads(text)
    for key in ADDED_RUN_KEYS:
        data["run"].pop(key, None)
    return data


@pytest.mark.parametrize("name", sorted(commands()))
def test_output_is_unchanged(rendered: dict[str, str], name: str) -> None:
    want = (OUTPUTS / f"{name}.txt").read_text()
    got = rendered[name]
    if name.endswith(".json"):
        assert _json(got) == _json(want)
    else:
        assert got.splitlines() == want.splitlines()
