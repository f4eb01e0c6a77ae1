"""Figures made fit for one self-contained page: an SVG file cleaned for inlining, a PNG as a data: URI.

matplotlib's SVG carries an XML declaration, a DOCTYPE and a <metadata> block that name the W3C's,
Dublin Core's and matplotlib's web addresses, and xmlns attributes that do too. None is needed inside
an HTML page (the HTML parser puts <svg> in the SVG namespace by itself), and the page must name no
web address at all, so they go. Ids are prefixed per figure: several figures on one page must not
resolve each other's clip paths or markers.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

_DROP = (
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*", re.IGNORECASE),
    re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL),
    re.compile(r"""\s+xmlns(:\w+)?=("[^"]*"|'[^']*')"""),
)
_ID = re.compile(r'\bid="([^"]+)"')
#: A scheme followed by // anywhere in the page; what is left of one (a URL in a stored string) is made
#: plain text by an entity for its colon, so nothing on the page reads as a web address.
WEB_ADDRESS = re.compile(r"(?i)(https?):(?=//)")


def inline_svg(text: str, prefix: str) -> str:
    """An SVG document as an element to put inside HTML: no declaration, DOCTYPE, metadata or xmlns;
    every id (and every reference to one) prefixed with `prefix`; xlink:href written as href (SVG 2)."""
    for pattern in _DROP:
        text = pattern.sub("", text)
    ids = set(_ID.findall(text))
    text = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', text)

    def ref(m: re.Match[str]) -> str:
        name = m.group(2)
        return f"{m.group(1)}{prefix}{name}" if name in ids else m.group(0)

    text = re.sub(r'(href="#)([^"]+)', ref, text)
    text = re.sub(r"(url\(#)([^)]+)", ref, text)
    text = text.replace("xlink:href=", "href=")
    text = WEB_ADDRESS.sub(r"\1&#58;", text)
    return text.strip()


def read_svg(path: Path, prefix: str) -> str | None:
    """The SVG file at `path`, cleaned by `inline_svg`; None when it cannot be read."""
    try:
        return inline_svg(path.read_text(encoding="utf-8"), prefix)
    except (OSError, UnicodeDecodeError):
        return None


def png_data_uri(path: Path) -> str | None:
    """The PNG at `path` as a data: URI; None when it cannot be read."""
    try:
        return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return None
