"""Hypothesis strategies of hostile input: values (NaN, huge numbers, control characters, very long strings,
deep nesting, wrong types), study files, mutations of a real bundle, run references and option values.

Placeholders filled in when an example runs: `{BASE}` (the sandbox's root, for absolute paths that must not be
written), `{ID}` (the fixture run's id), `{ID[:K]}` (its first K characters)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st


@dataclass(frozen=True)
class Deep:
    """A list nested `depth` deep around `leaf`, emitted as text (a recursive emitter, or json.dumps, would
    itself overflow the stack)."""

    depth: int
    leaf: Any = 1


CONTROL = ["\x1b[2J", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\n", "\r", "\t", "\x00", "\x7f", "\u202e", "\x08"]
IDS = ["../../../../../esc-rel", "{BASE}/esc-abs", "..", ".", "/", "a/b", "a\\b", "run\nok: all good", "%", "_",
       "x" * 300, "\x1b[2Jall ok", "", " ", "é𝔘漢", "'; DROP TABLE runs; --", "</script><script>alert(2)</script>"]

floats = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 0.0, -0.0, 1e300, 0.5, -1.0])
ints = st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**30, 10**400])
strings = st.one_of(
    st.sampled_from(CONTROL + IDS),
    st.builds(lambda c, n: c * n, st.sampled_from(["A", "é", "\x1b", "../"]), st.sampled_from([1000, 100_000])),
    st.text(max_size=20),
)
scalars = st.one_of(floats, ints, strings, st.booleans(), st.none())
deep = st.builds(Deep, st.sampled_from([3, 64, 200, 1000, 5000]), st.sampled_from([1, "x", None, {}]))
hostile = st.one_of(
    scalars, deep,
    st.lists(scalars, max_size=4),
    st.dictionaries(st.one_of(strings, st.sampled_from(["op", "size_mb", "mode", "id"])), scalars, max_size=3),
)


# -- YAML -------------------------------------------------------------------
def yaml_flow(value: Any) -> str:
    """`value` as YAML flow text: floats as YAML spells NaN and infinity, strings double-quoted with JSON's
    escapes (which YAML's double-quoted scalars share), Deep as brackets."""
    if isinstance(value, Deep):
        return "[" * value.depth + yaml_flow(value.leaf) + "]" * value.depth
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        return ".inf" if value == math.inf else "-.inf" if value == -math.inf else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(yaml_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_flow(k)}: {yaml_flow(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


SETTINGS_KEYS = ["frameworks", "devices", "params", "repetitions", "budget_s", "min_run_time_s", "timeout_s",
                 "mem_limit_mb", "threads", "warmup", "steps", "target_rel_ci", "per_call", "seed", "exclude",
                 "energy", "profile"]
STUDY_KEYS = ["name", "description", "workload", "quick", *SETTINGS_KEYS]

plausible = {
    "name": st.sampled_from(["fz", "a.b-c_1", "x" * 200]),
    "workload": st.sampled_from(["ops", "faults", "mlp", "cnn", "transformer", "peaks", "nope"]),
    "frameworks": st.sampled_from([["numpy"], ["torch"], ["tourch"], [], ["numpy", "numpy"]]),
    "devices": st.sampled_from([["cpu"], ["cuda"], ["cuda:99999999999999999999"], ["gpu"], []]),
    "params": st.one_of(
        st.fixed_dictionaries({"op": st.sampled_from(["add", "mul", "dot", "nope", ["add", "dot"]]),
                               "size_mb": st.one_of(floats, st.lists(floats, min_size=1, max_size=4))}),
        st.lists(st.fixed_dictionaries({"mode": st.sampled_from(["ok", "raise", ["ok", "sleep"]])}), max_size=3),
        st.fixed_dictionaries({"op": st.just("add"), "size_mb": deep})),
    "exclude": st.one_of(st.lists(st.dictionaries(st.sampled_from(["op", "size_mb", "colour"]), scalars,
                                                  max_size=2), max_size=3), deep),
    "quick": st.fixed_dictionaries({}, optional={k: hostile for k in ("params", "budget_s", "frameworks")}),
}


@st.composite
def study_texts(draw: st.DrawFn) -> bytes:
    """A study file: a valid small ops study, some keys set to plausible or hostile values (unknown keys among
    them), the text then sometimes damaged (a key given twice, a tab, a NUL, an alias bomb, non-UTF-8)."""
    doc: dict[str, Any] = {"name": "fz", "workload": "ops", "frameworks": ["numpy"],
                           "params": {"op": "add", "size_mb": 0.001}, "budget_s": 0.05}
    keys = st.one_of(st.sampled_from(STUDY_KEYS), st.sampled_from(STUDY_KEYS), st.sampled_from(STUDY_KEYS), strings)
    for key in draw(st.lists(keys, max_size=4)):
        choice = plausible.get(key)
        doc[key] = draw(st.one_of(choice, hostile) if choice is not None else hostile)
    lines = [f"{yaml_flow(k)}: {yaml_flow(v)}" for k, v in doc.items()]
    text = "\n".join(lines) + "\n"
    damage = draw(st.sampled_from(["none"] * 6 + ["twice", "tab", "nul", "bomb", "latin1", "cut", "anchor"]))
    if damage == "twice":
        text += lines[0] + "\n"
    elif damage == "tab":
        text = "\t" + text
    elif damage == "nul":
        text = text.replace(":", ":\x00", 1)
    elif damage == "bomb":  # 4**9 leaves if expanded: big enough to notice, small enough for a shared machine
        bomb = ["a0: &a0 [1, 1, 1, 1]"] + [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
                                          for i in range(1, 10)]
        text = "\n".join(bomb) + "\n" + text.replace('"params": ', '"params": {"op": "add", "size_mb": *a9}\n#', 1)
    elif damage == "latin1":
        return text.encode() + b"description: caf\xe9\n"
    elif damage == "cut":
        text = text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    elif damage == "anchor":
        text += '"exclude": [&x {"op": *x}]\n'
    return text.encode("utf-8", "surrogatepass")


# -- bundles -----------------------------------------------------------------
RUN_PATHS = [("run", k) for k in ("id", "study", "variant", "study_hash", "study_path", "filters", "settings",
                                  "status", "n_cases", "dlperf_version", "started_at", "finished_at", "derived",
                                  "env_fingerprint_hash")]
RESULT_KEYS = ("case_key", "repetition", "workload", "framework", "device", "params", "status", "reason",
               "measurement", "metrics", "wall_s", "started_at", "finished_at", "env_fingerprint_hash")
IDS_AND_NAMES = st.one_of(st.sampled_from(IDS + CONTROL), strings)
for_path: dict[str, st.SearchStrategy[Any]] = {
    "id": IDS_AND_NAMES, "study": IDS_AND_NAMES, "case_key": IDS_AND_NAMES, "study_path": IDS_AND_NAMES,
    "variant": st.sampled_from(["quick", "full", "v" * 17, "v" * 10_000, "", "\x1b[2J"]),
    "status": st.sampled_from(["ok", "complete", "running", "interrupted", "failed", "error", "oom", "bogus", ""]),
    "op": st.sampled_from(["add", "mul", "dot", "</script><script>alert(2)</script>", "", "nope"]),
    "size_mb": st.one_of(floats, ints, strings),
    "started_at": st.sampled_from(["2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00", "yesterday", "9999-99-99",
                                   "1-01-01T00:00:00+00:00"]),
}


@st.composite
def bundle_mutations(draw: st.DrawFn) -> list[tuple[tuple[Any, ...], str, Any]]:
    """1-3 edits of a bundle document: (path, what, value); what is set, delete or add (an unknown key).
    Paths are relative to `content` unless they start with 'doc'; result indexes are taken modulo the count."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["run", "result", "params", "env", "doc", "top"]))
        if where == "run":
            path: tuple[Any, ...] = draw(st.sampled_from(RUN_PATHS))
        elif where == "result":
            path = ("results", draw(st.integers(0, 3)), draw(st.sampled_from(RESULT_KEYS)))
        elif where == "params":
            path = ("results", draw(st.integers(0, 3)), "params", draw(st.sampled_from(["op", "size_mb", "dtype"])))
        elif where == "env":
            path = ("environments", 0, draw(st.sampled_from(["fingerprint_hash", "data", "created_at"])))
        elif where == "doc":
            path = ("doc", draw(st.sampled_from(["format", "format_version", "written_by", "written_at"])))
        else:
            path = (draw(st.sampled_from(["run", "results", "environments", "study"])),)
        what = draw(st.sampled_from(["set"] * 6 + ["delete", "add"]))
        value = draw(st.one_of(for_path.get(str(path[-1]), hostile), hostile))
        edits.append((path, what, value))
    return edits


# -- run references and option values ----------------------------------------
run_refs = st.one_of(
    st.sampled_from(["latest", "latest~1", "latest~0", "latest~-1", "latest~99999999999999999999", "latest~x",
                     "{ID}", "{ID}@", "{ID}@{ID}", "{ID}@nope", "@", "fuzz", "fuzz_", "fuzz%",
                     "{ID}/../..", "-", "--db", "-h", "{ID}\x1b[2J", "{ID} "]),
    st.builds(lambda k: f"{{ID[:{k}]}}", st.integers(0, 40)),
    IDS_AND_NAMES,
)
NUMBERS = ["nan", "NaN", "inf", "-inf", "1e309", "1e300", "-1", "0", "-0", "", " ", "abc", "1_000", "0x10",
           "9" * 400, "1e-320", "\u0663", "+5", " 5 ", "5.", "1", "10", "0.5", "1e18", "-1e300"]
numbers = st.one_of(st.sampled_from(NUMBERS), st.floats().map(repr), st.integers().map(str))
#: Values of the options that take a name: devices, frameworks, formats, case and machine filters.
names = st.one_of(st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:99999999999999999999", "cuda:-1", "gpu", "numpy",
                                   "torch", "tourch", "", " ", "json", "html", "csv", "table", "pdf", "CPU"]),
                  strings, numbers)
#: Values no numeric option accepts: not finite, negative, not a number, empty.
INVALID_NUMBERS = ["nan", "inf", "-inf", "1e400", "-1", "-1e300", "", " ", "abc", "nan5", "1e", "--"]
