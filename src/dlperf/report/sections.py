"""The one report interface: a study report is a list of sections, drawn by one renderer per format.

A section says what to show, not how: a `Table` (a title for the terminal, a heading and an
introduction for Markdown), a `Note` (a line of text), a `Heading` (Markdown only) or a `Figure`
(files already written by `report.plots`). `render_terminal` and `render_markdown` draw any list of
them; an HTML renderer is a third function over the same list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable


@dataclass(frozen=True)
class Table:
    """Rows of display strings under a header; numbers right-aligned, `text_cols` left and wrapped."""

    title: str
    header: list[str]
    rows: list[list[str]]
    #: Markdown heading line (e.g. "## Largest batch"); None: no heading of its own.
    heading: str | None = None
    #: Markdown paragraph between the heading and the table.
    intro: str | None = None
    text_cols: tuple[int, ...] = ()


@dataclass(frozen=True)
class Note:
    """A line of text: `text` on the terminal, `markdown` in Markdown ("" leaves it out there)."""

    text: str
    markdown: str | None = None
    terminal: bool = True


@dataclass(frozen=True)
class Heading:
    """A Markdown heading (and optional paragraph) with no terminal counterpart."""

    text: str
    intro: str | None = None


@dataclass(frozen=True)
class Figure:
    """Plot files already written; the terminal names them, Markdown shows the PNG."""

    paths: list[Path]
    alt: str
    label: str = "plot"
    heading: str | None = None
    #: Lines printed before the file names on the terminal, and after the image in Markdown.
    notes: list[str] = field(default_factory=list)
    markdown_notes: list[str] = field(default_factory=list)
    #: "terminal" or "markdown" where a format shows the figure elsewhere in its order; None: both.
    only: str | None = None


Section = Table | Note | Heading | Figure


def rich_table(title: str, header: list[str], rows: list[list[str]], text_cols: tuple[int, ...] = ()) -> RichTable:
    """A plain table from a header and string rows (numbers right-aligned; `text_cols` left-aligned
    and wrapped when the terminal is narrow, so the figures keep their width)."""
    table = RichTable(title=title, title_justify="left")
    for i, col in enumerate(header):
        text = i in text_cols or i - len(header) in text_cols
        table.add_column(escape(col), justify="left" if i < 2 or text else "right", no_wrap=not text,
                         min_width=16 if text else None)
    for row in rows:
        table.add_row(*(escape(c) for c in row))
    return table


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_terminal(sections: list[Section], console: Console) -> None:
    """Draw sections on a rich console (every string from a study or a store escaped)."""
    for s in sections:
        if isinstance(s, Table):
            console.print(rich_table(s.title, s.header, s.rows, s.text_cols))
        elif isinstance(s, Note) and s.terminal:
            console.print(escape(s.text), highlight=False)
        elif isinstance(s, Figure) and s.only != "markdown":
            for line in s.notes:
                console.print(escape(line), highlight=False)
            for p in s.paths:
                console.print(escape(f"{s.label}: {p}"), highlight=False)


def render_markdown(sections: list[Section], md_dir: Path | None = None) -> str:
    """Sections as Markdown; figure links relative to `md_dir` (the folder of the .md file) where possible."""
    out: list[str] = []
    for s in sections:
        if isinstance(s, Table):
            if s.heading:
                out += ["", s.heading, ""]
            if s.intro:
                out += [s.intro, ""]
            out.append(markdown_table(s.header, s.rows))
        elif isinstance(s, Heading):
            out += ["", s.text, ""]
            if s.intro:
                out += [s.intro, ""]
        elif isinstance(s, Note):
            if s.markdown != "":
                out += [s.markdown if s.markdown is not None else s.text, ""]
        elif isinstance(s, Figure) and s.only != "terminal":
            if s.heading:
                out += ["", s.heading, ""]
            out += [f"![{s.alt}]({_link(p, md_dir)})" for p in s.paths if p.suffix == ".png"] + [""]
            out += s.markdown_notes
    return "\n".join(out) + "\n"


def _link(path: Path, md_dir: Path | None) -> str:
    """The path as the Markdown file sees it: relative to its folder, else absolute."""
    try:
        return os.path.relpath(path.resolve(), (md_dir or Path.cwd()).resolve())
    except ValueError:  # another drive
        return str(path.resolve())
