"""README.md's size (issue 30: at most 300 lines, the chapters in docs/), and which files and blocks
tests/cli/test_readme.py reads: README.md, then docs/*.md by name, each place named `FILE:LINE`."""

from __future__ import annotations

from pathlib import Path

from tests.cli.readme_examples import README, ROOT, document_blocks, documents, plan, readme_blocks
from tests.cli.test_readme import BLOCKS, EXCLUDED

#: The most lines README.md may have (issue 30): the rest lives in docs/.
README_MAX_LINES = 300


def test_readme_is_short() -> None:
    """README.md stays an entry page (issue 30): what dlperf is, the two commands, "Your model", everyday use,
    where results go, exit codes and links; the chapters live in docs/."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (f"README.md has {len(lines)} lines, over {README_MAX_LINES}: move a "
                                            f"section to docs/ (its commands stay tested there)")


def test_every_doc_is_read_in_a_fixed_order(tmp_path: Path) -> None:
    """README.md first, then docs/*.md by name; a block is named by its file and line; every file with a fenced
    block contributes blocks, and a docs/ file's dlperf command is planned like a README one."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# x\n\n```bash\ndlperf runs\n```\n", encoding="utf-8")
    (tmp_path / "docs" / "b.md").write_text("text\n```bash\ndlperf list\ndlperf runs\n```\n", encoding="utf-8")
    (tmp_path / "docs" / "a.md").write_text("```yaml\nexclude: []\n```\n", encoding="utf-8")
    assert [p.relative_to(tmp_path).as_posix() for p in documents(tmp_path)] == ["README.md", "docs/a.md",
                                                                               "docs/b.md"]
    blocks = document_blocks(tmp_path)
    assert [b.where for b in blocks] == ["README.md:4", "docs/a.md:2", "docs/b.md:3"]
    planned = plan(blocks)
    assert [(p.template, p.shown.where) for p in planned] == [(["runs"], "README.md:4"), (["list"], "docs/b.md:3")]
    assert [place.where for place in planned[0].places] == ["README.md:4", "docs/b.md:4"]
    real = {path.relative_to(ROOT).as_posix() for path in documents() if "```" in path.read_text(encoding="utf-8")}
    assert real <= {b.source for b in BLOCKS}
    assert any(b.source.startswith("docs/") for b in BLOCKS), "no docs/ file's block is read"


def test_a_block_fenced_inside_a_list_item_is_read() -> None:
    """An indented fence opens a block whose lines lose its indent: its commands are found (and, like the fleet's
    scheduler, worker and dask run, excluded with a reason rather than silently skipped)."""
    text = "- a fleet:\n\n  ```text\n  dlperf fleet scheduler --port 8786   # on one machine\n  ```\n\nafter\n"
    blocks = readme_blocks(text, "docs/x.md")
    assert [(b.lang, b.lines, b.where) for b in blocks] == [("text", ["dlperf fleet scheduler --port 8786   # on one "
                                                                       "machine"], "docs/x.md:4")]
    assert [p.template for p in plan(blocks)] == [["fleet", "scheduler", "--port", "8786"]]
    assert any(item.template[:2] == ["fleet", "scheduler"] for item in EXCLUDED), "the fleet block is not read"
