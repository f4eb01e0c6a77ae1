"""Every figure printed before the issue-12 reshaping is printed the same after it.

`tests/golden/` holds a store of real runs (ops, peaks, mlp, backends, cnn with kernel profiles, every
failure status, a maxbatch search) and what dlperf at commit c0de3e7 printed for them with `show`,
`report` (terminal and Markdown), `export` (CSV and JSON), `runs` and `compare`. Text outputs must be
identical line for line; Markdown reports must hold the same lines in the same order (blank lines may
differ); JSON exports must hold
the same data (key order may differ, and columns a later schema adds to a run are named in ADDED_RUN_KEYS).
"""

from __future__ import annotations

import json

import pytest

from tests.golden.render import OUTPUTS, commands, render_all

#: Run-table columns added after the golden store was written (schema migrations), not in its outputs.
ADDED_RUN_KEYS: tuple[str, ...] = ("derived",)  # schema v2: the derived figures a run was measured under


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return render_all()


def _json(text: str) -> dict:
    """The export's data without what schema v2 changes on purpose: the run's added columns, and the
    environment ids (v2 merges environments that differed only in derived data such as the commit)."""
    data = json.loads(text)
    for key in (*ADDED_RUN_KEYS, "env_id"):
        data["run"].pop(key, None)
    for r in data["results"]:
        r.pop("env_id", None)
    return data


def _csv(text: str) -> list[str]:
    """CSV lines without the env_id column (last), renumbered by schema v2 like the JSON's."""
    return [line.rsplit(",", 1)[0] for line in text.splitlines()]


@pytest.mark.parametrize("name", sorted(commands()))
def test_output_is_unchanged(rendered: dict[str, str], name: str) -> None:
    want = (OUTPUTS / f"{name}.txt").read_text()
    got = rendered[name]
    if name.endswith(".json"):
        assert _json(got) == _json(want)
    elif name.endswith(".csv"):
        assert _csv(got) == _csv(want)
    elif name.endswith(".md"):
        assert [line.rstrip() for line in got.splitlines() if line.strip()] == [
            line.rstrip() for line in want.splitlines() if line.strip()]
    else:
        assert got.splitlines() == want.splitlines()


def test_an_unwritable_plot_folder_is_one_error(tmp_path) -> None:
    """A report whose plots cannot be written ends with the user's error, not a traceback."""
    import shutil

    from click.testing import CliRunner

    from dlperf.cli import cli
    from dlperf.errors import DlperfError
    from tests.golden.render import STORE

    db = tmp_path / "store.sqlite"
    shutil.copy(STORE, db)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = CliRunner().invoke(cli, ["report", "cnn_tiny", "--db", str(db), "--plot-dir", str(blocker / "plots")])
    assert isinstance(res.exception, DlperfError)
    assert str(res.exception).startswith(f"{blocker / 'plots'}: cannot write plots")
