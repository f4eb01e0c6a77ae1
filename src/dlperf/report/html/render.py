"""The third renderer of the one report interface: a list of sections as an HTML fragment.

HTML shows what Markdown shows, in Markdown's order (a section marked `only="terminal"`, a Note with
`markdown=""`, are the terminal's): a Table becomes a <table> its header sorts, a Note a paragraph (or
a list item), a Heading a heading and its paragraph, a Figure its SVG inlined (`svg.inline_svg`), or
its PNG as a data: URI where there is no SVG. Every string is escaped by Jinja2's autoescape; the few
Markdown marks the reports use (`code`, **bold**, [text](link)) are drawn after escaping, links as
their text only (the page names no web address).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import count
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import jinja2
from markupsafe import Markup, escape

from dlperf.report.html.svg import WEB_ADDRESS, png_data_uri, read_svg
from dlperf.report.sections import Figure, Heading, Note, Section, Table

#: Tables longer than this show their first rows and a button for the rest (the page's script).
COLLAPSE_ROWS = 25
_NUMERIC = re.compile(r"^[-+~<>]?\s*[$]?[\d.,]+(e[-+]?\d+)?\s*\S{0,6}$", re.IGNORECASE)


class TableBlock(TypedDict):
    """A table as templates/sections.html.j2 draws it."""
    kind: Literal["table"]
    level: int
    heading: str | None
    intro: str | None
    caption: str | None
    header: list[str]
    rows: list[list[str]]
    align: list[str]
    row_classes: list[str]
    collapse: bool


class ListItem(TypedDict):
    """One `- item` line; `sub`: it was indented (drawn nested)."""
    text: str
    sub: bool


class ListBlock(TypedDict):
    kind: Literal["ul"]
    items: list[ListItem]


class ParagraphBlock(TypedDict):
    kind: Literal["p"]
    text: str


class HeadingBlock(TypedDict):
    kind: Literal["heading"]
    level: int
    text: str


class Image(TypedDict):
    """A figure's image: its SVG inlined, or its PNG as a data: URI."""
    name: str
    svg: NotRequired[Markup]
    png: NotRequired[str]


class FigureBlock(TypedDict):
    kind: Literal["figure"]
    level: int
    heading: str | None
    alt: str
    images: list[Image]
    notes: list[TextBlock]
    missing: list[str]


class FoldBlock(TypedDict):
    """HTML folded under one summary line (the page's claims that no run here can touch)."""
    kind: Literal["fold"]
    summary: str
    html: Markup


#: What Markdown lines become (a paragraph or a list).
TextBlock = ListBlock | ParagraphBlock
#: Every kind of block the template draws.
Block = TableBlock | ListBlock | ParagraphBlock | HeadingBlock | FigureBlock | FoldBlock


@lru_cache(maxsize=1)
def jinja_env() -> jinja2.Environment:
    """The templates of report/html/templates, autoescape on for every template."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("dlperf.report.html", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["md"] = markdown_inline
    env.filters["nolink"] = no_web_address
    return env


def no_web_address(text: Any) -> Markup:
    """`text` escaped, with any http(s):// made plain text (an entity for its colon)."""
    return Markup(WEB_ADDRESS.sub(r"\1&#58;", str(escape(text))))


def markdown_inline(text: Any) -> Markup:
    """`text` escaped, then `code`, **bold** and [text](link) (as its text) drawn."""
    out = str(no_web_address(text))
    out = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return Markup(out)


def heading_level(markdown_heading: str) -> tuple[int, str]:
    """("## Roofline") -> (3, "Roofline"): Markdown's ## is the page's h3 (h1 the page, h2 a run)."""
    hashes = len(markdown_heading) - len(markdown_heading.lstrip("#"))
    return min(5, max(3, hashes + 1)), markdown_heading.lstrip("#").strip()


def align(header: list[str], rows: list[list[str]], text_cols: tuple[int, ...]) -> list[str]:
    """Per column: "num" where most of its filled cells are numbers (right-aligned), else "text"."""
    out = []
    for i in range(len(header)):
        cells = [row[i].strip() for row in rows if i < len(row) and row[i].strip() not in ("", "-")]
        numeric = bool(cells) and sum(bool(_NUMERIC.match(c)) for c in cells) >= 0.8 * len(cells)
        is_text = i in text_cols or i - len(header) in text_cols
        out.append("num" if numeric and not is_text else "text")
    return out


def table_block(header: list[str], rows: list[list[str]], *, caption: str | None = None,
                heading: str | None = None, intro: str | None = None, text_cols: tuple[int, ...] = (),
                row_classes: list[str] | None = None) -> TableBlock:
    """A table as the template draws it (also used by the page for its own tables)."""
    level, text = heading_level(heading) if heading else (3, None)
    return {"kind": "table", "level": level, "heading": text, "intro": intro, "caption": caption,
            "header": header, "rows": rows, "align": align(header, rows, text_cols),
            "row_classes": row_classes or [""] * len(rows), "collapse": len(rows) > COLLAPSE_ROWS}


def text_blocks(lines: list[str]) -> list[TextBlock]:
    """Markdown lines as paragraphs and lists: consecutive `- item` lines (indented: nested look) make one list."""
    out: list[TextBlock] = []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("- "):
            item: ListItem = {"text": stripped[2:], "sub": line.startswith(" ")}
            last = out[-1] if out else None
            if last is not None and last["kind"] == "ul":
                last["items"].append(item)
            else:
                out.append({"kind": "ul", "items": [item]})
        else:
            out.append({"kind": "p", "text": stripped})
    return out


def figure_block(fig: Figure, prefix: str) -> FigureBlock:
    """A figure: each PNG's SVG sibling inlined (it is written beside it), else the PNG as a data: URI."""
    level, heading = heading_level(fig.heading) if fig.heading else (3, None)
    images: list[Image] = []
    pngs = [p for p in fig.paths if p.suffix == ".png"]
    svgs = [p for p in fig.paths if p.suffix == ".svg"]
    for png in pngs:
        twin = png.with_suffix(".svg")
        if twin not in svgs and twin.exists():
            svgs.append(twin)
    for k, svg in enumerate(svgs):
        text = read_svg(svg, f"{prefix}-{k}-")
        if text is not None:
            images.append({"svg": Markup(text), "name": svg.name})
    inlined = {i["name"] for i in images}
    for png in pngs:
        if png.with_suffix(".svg").name not in inlined:
            uri = png_data_uri(png)
            if uri is not None:
                images.append({"png": uri, "name": png.name})
    missing = [str(p) for p in fig.paths if not Path(p).exists()]
    return {"kind": "figure", "level": level, "heading": heading, "alt": fig.alt, "images": images,
            "notes": text_blocks(fig.markdown_notes), "missing": missing}


def blocks(sections: list[Section], prefix: str = "fig") -> list[Block]:
    """Sections as the template's blocks, Markdown's choice of what to show and in what order (figures'
    SVG ids prefixed `prefix` and their number here: give each call a prefix of its own on a page)."""
    out: list[Block] = []
    figures = count(1)
    for s in sections:
        if isinstance(s, Table):
            out.append(table_block(s.header, s.rows, caption=None if s.heading else s.title, heading=s.heading,
                                   intro=s.intro, text_cols=s.text_cols))
        elif isinstance(s, Heading):
            level, text = heading_level(s.text)
            out.append({"kind": "heading", "level": level, "text": text})
            out += text_blocks([s.intro]) if s.intro else []
        elif isinstance(s, Note):
            if s.markdown != "":
                for b in text_blocks([s.markdown if s.markdown is not None else s.text]):
                    last = out[-1] if out else None
                    if b["kind"] == "ul" and last is not None and last["kind"] == "ul":
                        last["items"] += b["items"]
                    else:
                        out.append(b)
        elif isinstance(s, Figure) and s.only != "terminal":
            out.append(figure_block(s, f"{prefix}{next(figures)}"))
    return out


def render_blocks(items: Sequence[Block]) -> Markup:
    """Blocks drawn by templates/sections.html.j2."""
    return Markup(jinja_env().get_template("sections.html.j2").render(blocks=items, fold=COLLAPSE_ROWS))


def render_html(sections: list[Section], prefix: str = "fig") -> str:
    """Sections as an HTML fragment (every string escaped); `prefix` starts the ids of its figures' elements."""
    return str(render_blocks(blocks(sections, prefix)))
