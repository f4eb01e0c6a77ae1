"""What a store's URL names: the file of a SQLite URL. Below both `engines` (which opens stores) and `failures`
(which names what failed), so that neither imports the other to read a path."""

from __future__ import annotations

from pathlib import Path


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (`sqlite:///PATH`, or the URI form `sqlite:///file:PATH?mode=ro&uri=true`);
    None for an in-memory or another database."""
    if not url.startswith("sqlite:///"):
        return None
    rest = url.removeprefix("sqlite:///")
    if rest.startswith("file:") and "uri=true" in rest:
        rest = rest.removeprefix("file:").split("?", 1)[0]
    return None if rest in ("", ":memory:") else Path(rest)


__all__ = ["sqlite_path"]
