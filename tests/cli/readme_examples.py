"""Reading the fenced blocks of README.md and docs/*.md for tests/cli/test_readme.py: their commands (with the
output they show for them) expanded into argv lists, and the masked, line-by-line comparison of shown output with
real output. Every place is named `FILE:LINE`, FILE as written from the repository's root (`docs/studies.md:12`)."""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COMMAND_LANGS = {"", "bash", "sh", "shell", "console", "text"}
COMMAND = re.compile(r"^(?:\$ )?(?:\S*/)?dlperf(?:\s|$)")
MAKE = re.compile(r"^(?:\$ )?make(?:\s|$)")
MEASURING = {"run", "peaks", "maxbatch"}  # commands that measure: run once, with every optional part shown

def documents(root: Path = ROOT) -> list[Path]:
    """The files whose blocks are read, in the order their commands run: README.md, then docs/*.md by name."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


@dataclass
class Block:
    lang: str
    first_line: int
    lines: list[str] = field(default_factory=list)
    source: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.first_line}"


@dataclass
class Shown:
    """A command line of the README or docs/, and the output lines it shows it printing."""

    line_no: int
    text: str
    output: list[tuple[int, str]] = field(default_factory=list)
    source: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line_no}"


@dataclass
class Planned:
    """One command to run: the argv before substitution, where it is first shown, and every place that shows it
    (the first included), in reading order."""

    template: list[str]
    shown: Shown
    places: list[Shown]

    @property
    def label(self) -> str:
        return f"{self.shown.where}: dlperf {' '.join(self.template)}"

    @property
    def shows_output(self) -> bool:
        """Some place shows what this command prints: it runs as shown (no stand-in, no speed-ups)."""
        return any(place.output for place in self.places)


def readme_blocks(text: str, source: str = "README.md") -> list[Block]:
    """The fenced blocks of `text`. A fence indented under a list item (`  ```text`) opens a block too; its lines
    lose that indent, so a command in it starts its line as at the top level."""
    blocks: list[Block] = []
    current: Block | None = None
    indent = 0
    for no, line in enumerate(text.splitlines(), 1):
        fence = line.lstrip(" ").startswith("```")
        if current is None and fence:
            indent = len(line) - len(line.lstrip(" "))
            current = Block(line.strip()[3:].strip(), no + 1, source=source)
        elif current is not None and fence:
            blocks.append(current)
            current = None
        elif current is not None:
            current.lines.append(line[indent:] if line[:indent].isspace() else line)
    assert current is None, f"{source}:{current.first_line - 1}: this block is never closed"
    return blocks


def document_blocks(root: Path = ROOT) -> list[Block]:
    """The fenced blocks of every file of documents(), in that order."""
    return [block for path in documents(root)
            for block in readme_blocks(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())]


def shown_commands(blocks: list[Block]) -> tuple[list[Shown], list[tuple[int, str]]]:
    """The dlperf commands of `blocks` with their shown output, and their `make` lines (`FILE:LINE`, text)."""
    commands: list[Shown] = []
    makes: list[tuple[str, str]] = []
    for block in blocks:
        if block.lang not in COMMAND_LANGS:
            continue
        current: Shown | None = None
        for no, line in enumerate(block.lines, block.first_line):
            if COMMAND.match(line):
                current = Shown(no, line.removeprefix("$ "), source=block.source)
                commands.append(current)
            elif MAKE.match(line):
                makes.append((f"{block.source}:{no}", line.removeprefix("$ ")))
                current = None
            elif current is not None and line.strip() and not line.strip().startswith("#"):
                current.output.append((no, line))
    return commands, makes


def expand(shown: Shown) -> list[list[str]]:
    """The argv lists (without `dlperf`) that one README or docs/ line stands for."""
    tokens = shlex.split(shown.text, comments=True)[1:]
    parts: list[tuple[bool, list[str]]] = []  # (optional, tokens)
    group: list[str] | None = None
    for tok in tokens:
        if group is None and tok.startswith("["):
            group, tok = [], tok[1:]
        if group is not None:
            closing = tok.endswith("]")
            group.append(tok.removesuffix("]"))
            if closing:
                if group[0].startswith("-"):  # `[words]` without an option only describe
                    parts.append((True, group))
                group = None
        else:
            parts.append((False, [tok]))
    assert group is None, f"{shown.where}: unclosed '[' in `{shown.text}`"
    full = [t for _, toks in parts for t in toks]
    bare = [t for optional, toks in parts if not optional for t in toks]
    variants = [full] if not tokens or tokens[0] in MEASURING or full == bare else [full, bare]
    out: list[list[str]] = []
    for argv in variants:
        for combo in itertools.product(*(t.split("|") if "|" in t else [t] for t in argv)):
            out.append(list(combo))
    return out


def plan(blocks: list[Block]) -> list[Planned]:
    """Every command to run, in reading order; a command shown twice runs once, at its first place."""
    planned: dict[tuple[str, ...], Planned] = {}
    for shown in shown_commands(blocks)[0]:
        for argv in expand(shown):
            key = tuple(argv)
            if key in planned:
                planned[key].places.append(shown)
            else:
                planned[key] = Planned(argv, shown, [shown])
    return list(planned.values())


# -- shown output against real output -----------------------------------------------------------------------------

RULE = re.compile(r"^[\s┏┓┗┛┡┩┳┻╇╈━─└┘┌┐┴┬┼├┤╭╮╯╰═]+$")
LABEL_ONLY = ("threads:", "validity:")  # the rest of these lines is this machine's
# Lines printed on some runs only, not compared on either side: a line per energy meter that could not measure, the
# ops tables' legend of validity marks (only when a figure is marked), the roofline's flag notes, the estimate note,
# and a narrow table's numbered notes (`[1] other processes used 1.0 cores while it ran`: a busy machine's).
OPTIONAL = re.compile(r"^(?:energy:|\(c\) contended:|\d+ case\(s\) above |energy marked 'est\.'|\[\d+\] )")
SKIPPED_COLUMNS = {"note", "flags", "check", "energy/call"}
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?(?:[kMG](?![A-Za-z]))?")


def mask(text: str) -> str:
    """Numbers, ids, units and machine-dependent words replaced by a symbol each; whitespace collapsed."""
    text = re.sub(r"\b[\w.]+-\d{8}-\d{6}-[0-9a-f]{4}\b", "RUN", text)
    text = re.sub(r"commit [^)\s]+", "commit HASH", text)
    text = re.sub(r"sqlite:///\S+", "DB", text)
    text = re.sub(r" \((?:n|c|i)\)", "", text)  # the ops tables' validity marks
    text = NUMBER.sub("N", text)
    text = re.sub(r"N ?(?:ns|us|µs|ms|s)\b", "T", text)
    text = re.sub(r"N ?(?:B|KiB|MiB|GiB|TiB)\b", "SIZE", text)
    text = re.sub(r"\b(?:valid|noisy|contended|invalid|unknown)\b", "V", text)
    text = re.sub(r"\b(?:LN|LLC|DRAM)(?:-(?:LN|LLC|DRAM))?\b", "LEVEL", text)  # a level, or the slope between two
    return " ".join(text.split())


@dataclass
class Item:
    key: tuple[str, ...]
    line_no: int
    raw: str


def items(lines: list[tuple[int, str]]) -> list[Item | None]:
    """Comparable lines (None: a `...` gap); rules, optional lines and the wrapped second lines of table rows
    dropped, and lines that mask alike in a row kept once (a machine with fewer cache levels prints fewer)."""
    out = _items(lines)
    return [it for k, it in enumerate(out) if k == 0 or it is None or out[k - 1] is None or out[k - 1].key != it.key]


def _items(lines: list[tuple[int, str]]) -> list[Item | None]:
    out: list[Item | None] = []
    columns: list[str] = []
    for no, raw in lines:
        line = raw.rstrip()
        text = line.strip()
        if not text or RULE.match(line) or OPTIONAL.match(text):
            continue
        if text == "...":
            out.append(None)
        elif text.startswith("┃"):
            columns = [c.strip() for c in text.strip("┃").split("┃")]
            out.append(Item(("heading", *columns), no, line))
        elif text.startswith("│"):
            cells = [c.strip() for c in text.strip("│").split("│")]
            if not cells[0]:
                continue
            named = columns if len(columns) == len(cells) else [""] * len(cells)
            out.append(Item(("row", *("" if col in SKIPPED_COLUMNS else mask(c) for col, c in zip(named, cells,
                                                                                                 strict=True))),
                            no, line))
        elif text.startswith(LABEL_ONLY) or (line[0].isspace() and ":" in text):
            out.append(Item(("label", mask(text.split(":")[0])), no, line))
        elif re.match(r"\[\d+/\d+\] ", text):
            out.append(Item(("progress", mask(text.split(" - ")[0])), no, line))
        else:
            out.append(Item(("text", mask(text)), no, line))
    return out


def match_from(segment: list[Item], real: list[Item], start: int) -> tuple[int, int]:
    """Match `segment` at real[start:]: (items of the segment matched, the real index reached)."""
    j = start
    for i, want in enumerate(segment):
        if j < len(real) and real[j].key == want.key:
            j += 1
        else:
            return i, j
    return len(segment), j


def shape_mismatch(shown: Shown, output: str) -> str | None:
    """Why the shown output is not the shape of `output`, naming the line (`FILE:LINE`); None when it is."""
    wanted = items(shown.output)
    real = [i for i in items(list(enumerate(output.splitlines(), 1))) if i is not None]
    segments: list[list[Item]] = [[]]
    for it in wanted:
        segments.append([]) if it is None else segments[-1].append(it)
    anchored_start, anchored_end = wanted[0] is not None, wanted[-1] is not None
    pos = 0
    for si, segment in enumerate(segments):
        if not segment:
            continue
        last = si == len(segments) - 1
        starts = [pos] if si == 0 and anchored_start else range(pos, len(real) + 1)
        best = (-1, 0, 0)
        for start in starts:
            done, reached = match_from(segment, real, start)
            if done == len(segment) and (not (last and anchored_end) or reached == len(real)):
                pos = reached
                break
            best = max(best, (done, start, reached))
        else:
            done, _, reached = best
            if done == len(segment):
                return (f"{shown.source}:{segment[-1].line_no}: the sample stops here but the command goes on with "
                        f"{real[reached].raw.strip()!r} (add the lines, or a '...' line)")
            want = segment[done]
            got = real[reached].raw.strip() if reached < len(real) else "(the end of its output)"
            return (f"{shown.source}:{want.line_no}: {want.raw.strip()!r} is not what the command prints there: it "
                    f"prints {got!r} (compared as {want.key} against "
                    f"{real[reached].key if reached < len(real) else None})")
    return None
