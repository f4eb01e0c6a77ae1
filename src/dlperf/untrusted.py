"""What dlperf does with text and files that came from outside (a bundle, a store another machine wrote, a
study path): ids checked against one strict pattern before they name anything, names made safe before they
become a path, control characters spelled out before they reach a terminal, nesting bounded, and only
regular files read (a FIFO would block forever, a device never ends)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

#: An id that may become a file or folder name (a run id, a study name, a fingerprint hash): letters, digits,
#: `_`, `.`, `-`; never `.` or `..` alone (a path component that climbs). Its length is the caller's column's.
ID_PATTERN = r"(?!\.{1,2}\Z)[A-Za-z0-9_.-]+"
_ID = re.compile(ID_PATTERN)
#: The deepest nesting of lists and mappings dlperf reads from a bundle or a study file (a real one: under 10).
MAX_DEPTH = 64


def is_id(text: object, max_length: int) -> bool:
    """Whether `text` is an id that may name a file (`ID_PATTERN`), at most `max_length` characters."""
    return isinstance(text, str) and 0 < len(text) <= max_length and _ID.fullmatch(text) is not None


def path_component(text: str, max_length: int = 128) -> str:
    """`text` as one safe file-name component: characters outside the id pattern become `_`, a leading dot
    (`.`, `..`, a hidden name) too, cut to `max_length`. An id that passed `is_id` comes back unchanged but for
    a leading dot; this is the second fence where data becomes a path."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:max_length]
    if safe.startswith("."):
        safe = "_" + safe[1:]
    return safe or "_"


def printable(text: object) -> str:
    """`text` with every character a terminal would act on (escape sequences, newlines, carriage returns,
    bidirectional overrides) spelled as Python does (`\\x1b`, `\\n`, `\\u202e`): data from outside shown as
    data. Rich's markup is another matter: escape it too where the text goes through rich."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii")
                   for ch in s)


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and mappings in `value` nest more than `limit` deep (walked without recursion)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        node, depth = todo.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list | tuple) else None
        if children is None:
            continue
        if depth > limit:
            return True
        todo.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return False


def not_regular(path: Path) -> str | None:
    """Why `path` (links followed) is not a regular file that can be read to its end, or None where it is one
    or does not exist: a FIFO blocks its reader forever, a device never ends, a socket cannot be read."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return f"is {kind}, not a regular file"
