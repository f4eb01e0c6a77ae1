"""Issue 29's fuzz harness: hostile study files, bundles, run references and option values given to `dlperf`.

Every input must end with exit 0, or one `dlperf: error:` line and an exit code the README documents; never
exit 70, never a traceback, never a hang (each example has a time limit), and a refused command leaves the store
byte-for-byte as it was. Commands run in this process (tests/fuzz/harness.py); a few examples run the real entry
point in a subprocess. Deterministic (derandomized, no example database) and within a fixed budget of 128
examples: study files 35, bundles 15, run references 30, reading options 25, executing commands' options 20, the
real entry point 3 (about 60-90 s on a 2-core machine, the fixture's run included). DLPERF_FUZZ_SCALE=10 runs ten
times as many, with shrinking, for a longer local search."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from copy import deepcopy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tests.fuzz import strategies as S
from tests.fuzz.harness import Outcome, call_dlperf, check_outcome, escaped, fresh_copy, store_digest

SCALE = float(os.environ.get("DLPERF_FUZZ_SCALE", "1"))
#: A failing example's megabyte-long study text is printed as found; Hypothesis warns that its repr is large.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


def budget(examples: int) -> settings:
    """`examples` examples (times DLPERF_FUZZ_SCALE), the same ones on every run; shrinking only when scaled up
    (a failing example is printed as found; shrinking it in CI would cost minutes)."""
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if SCALE > 1 else [])
    return settings(max_examples=max(1, round(examples * SCALE)), derandomize=True, database=None, deadline=None,
                    phases=phases, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


TINY_STUDY = """name: fuzz_tiny
workload: ops
frameworks: [numpy]
params: {op: add, size_mb: [0.001, 0.002]}
budget_s: 0.05
min_run_time_s: 0.05
target_rel_ci: 0.0001
timeout_s: 60
"""


class Sandbox:
    """The fuzz session's folder: BASE holds only work/; commands run in work/x/y/z, so that a path built from
    data with five '..' or an absolute '{BASE}/...' lands in BASE, where `escaped` sees it. The fixture store
    holds one complete 2-case ops run made by `dlperf run`; `bundle` is that run's exported bundle."""

    def __init__(self, base: Path) -> None:
        self.base, self.work = base, base / "work"
        self.cwd = self.work / "x" / "y" / "z"
        self.cwd.mkdir(parents=True)
        self.study = self.work / "tiny.yaml"
        self.study.write_text(TINY_STUDY)
        self.store = self.work / "fixture.sqlite"
        self.n = 0

    def fresh(self, what: str) -> Path:
        """A new path in the sandbox (never reused: each example its own files)."""
        self.n += 1
        return self.work / "ex" / f"{self.n}-{what}"

    def fill(self, text: str) -> str:
        """The strategies' placeholders: {BASE}, {ID}, {ID[:K]}."""
        text = re.sub(r"\{ID\[:(\d+)\]\}", lambda m: self.run_id[: int(m.group(1))], text)
        return text.replace("{ID}", self.run_id).replace("{BASE}", str(self.base))

    def store_copy(self) -> Path:
        return fresh_copy(self.store, self.fresh("store.sqlite"))

    def no_escape(self) -> None:
        """Nothing was written outside work/ (what was is removed, so that the next example starts clean)."""
        out = escaped(self.base, {"work"})
        for name in out:
            shutil.rmtree(self.base / name, ignore_errors=True)
            (self.base / name).unlink(missing_ok=True)
        assert out == [], f"a path built from data left the sandbox: {out}"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    sandbox = Sandbox(tmp_path_factory.mktemp("fuzz"))
    made = run_cli("run", str(sandbox.study), "--threads", "1", db=sandbox.store, cwd=sandbox.cwd)
    assert made.returncode == 0, made.stderr
    sandbox.run_id = re.search(r"run (fuzz_tiny-\S+):", made.stdout).group(1)
    sandbox.bundle_path = sandbox.work / "fixture.dlperf.json.gz"
    res = call_dlperf("bundle", "export", sandbox.run_id, "-o", str(sandbox.bundle_path), "--db",
                      str(sandbox.store), cwd=sandbox.cwd)
    assert res.code == 0, res.describe()
    sandbox.bundle = json.loads(gzip.decompress(sandbox.bundle_path.read_bytes()))
    sandbox.digest = store_digest(sandbox.store)
    return sandbox


def read_only(box: Sandbox, *args: str, regression_exit: bool = False) -> None:
    """A command that only reads the fixture store: whatever it says, the store stays as it was."""
    res = call_dlperf(*args, "--db", str(box.store), cwd=box.cwd)
    check_outcome(res, store=box.store, before=box.digest, regression_exit=regression_exit)
    assert store_digest(box.store) == box.digest, f"a reading command changed the store: {res.describe()}"
    box.no_escape()


# -- study files ----------------------------------------------------------------
@budget(35)
@given(text=S.study_texts())
def test_study_files(box: Sandbox, text: bytes) -> None:
    """`plan` on a hostile study file; where plan refuses it, `run` must refuse it too, before it creates a
    store or changes one."""
    study = box.fresh("study.yaml")
    study.parent.mkdir(parents=True, exist_ok=True)
    study.write_bytes(text)
    planned = call_dlperf("plan", str(study), "--db", str(box.store), cwd=box.cwd)
    check_outcome(planned, store=box.store, before=box.digest)
    if planned.code == 0:
        return
    store, missing = box.store_copy(), box.fresh("never.sqlite")
    before = store_digest(store)
    check_outcome(call_dlperf("run", str(study), "--db", str(store), cwd=box.cwd), store=store, before=before)
    ran = call_dlperf("run", str(study), "--db", str(missing), cwd=box.cwd)
    check_outcome(ran, store=missing, before=None)
    assert ran.code != 0, f"plan refused the study, run did not: {ran.describe()}"
    box.no_escape()


# -- bundles ----------------------------------------------------------------------
def mutated_bundle(doc: dict[str, Any], edits: list[tuple[tuple[Any, ...], str, Any]], recompute: bool,
                   gzipped: bool) -> bytes:
    """The bundle `doc` with `edits` applied (strategies.bundle_mutations), its checksum recomputed (so that the
    edit reaches validation) unless `recompute` is false; Deep values written as nested brackets."""
    doc, deep = deepcopy(doc), {}

    def plain(value: Any) -> Any:
        if isinstance(value, S.Deep):
            deep[f"__fuzz_deep_{len(deep)}__"] = value
            return f"__fuzz_deep_{len(deep) - 1}__"
        if isinstance(value, list):
            return [plain(v) for v in value]
        return {k: plain(v) for k, v in value.items()} if isinstance(value, dict) else value

    for path, what, value in edits:
        node: Any = doc if path[0] == "doc" else doc["content"]
        keys = list(path[1:] if path[0] == "doc" else path)
        for k in keys[:-1]:
            if isinstance(node, list) and isinstance(k, int) and node:
                node = node[k % len(node)]
            elif isinstance(node, dict) and k in node:
                node = node[k]
            else:
                node = None
                break
        last = keys[-1]
        if isinstance(node, list) and isinstance(last, int) and node:
            last = last % len(node)
        elif not isinstance(node, dict):
            continue
        if what == "delete" and isinstance(node, dict):
            node.pop(last, None)
        elif what == "add" and isinstance(node, dict):
            node["fuzz_unknown_key"] = plain(value)
        else:
            node[last] = plain(value)

    def text(value: Any) -> str:
        out = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        for name, d in deep.items():
            out = out.replace(json.dumps(name), "[" * d.depth + json.dumps(plain(d.leaf)) + "]" * d.depth)
        return out

    content = text(doc.pop("content"))
    if recompute:
        doc["checksum"] = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    head = text(doc)
    data = (head[:-1] + ("," if len(head) > 2 else "") + '"content":' + content + "}").encode()
    return gzip.compress(data, mtime=0) if gzipped else data


@budget(15)
@given(edits=S.bundle_mutations(), recompute=st.sampled_from([True] * 9 + [False]), gzipped=st.booleans(),
       into_copy=st.booleans())
def test_bundles(box: Sandbox, edits: list, recompute: bool, gzipped: bool, into_copy: bool) -> None:
    """`bundle import` of the fixture's bundle, edited; where it is imported, `show`, `runs` and `report` of the
    run it brought must keep the property too, and write nothing outside their folder."""
    edits = [(p, w, box.fill(v) if isinstance(v, str) else v) for p, w, v in edits]
    path = box.fresh("b.dlperf.json.gz")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mutated_bundle(box.bundle, edits, recompute, gzipped))
    target = box.store_copy() if into_copy else box.fresh("target.sqlite")
    before = store_digest(target)
    res = call_dlperf("bundle", "import", str(path), "--db", str(target), cwd=box.cwd)
    check_outcome(res, store=target, before=before)
    box.no_escape()
    if res.code != 0:
        return
    run_id = json.loads(gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes())["content"]["run"]["id"]
    after = store_digest(target)
    for command in (("show", "--db", str(target), "--", run_id), ("runs", "--db", str(target)),
                    ("report", "--db", str(target), "--", run_id)):
        check_outcome(call_dlperf(*command, cwd=box.cwd), store=target, before=after)
        assert store_digest(target) == after, f"{command[0]} changed the store"
        box.no_escape()


# -- run references --------------------------------------------------------------
REF_COMMANDS = [("show", "{REF}"), ("show", "{REF}", "--errors"), ("export", "{REF}", "--format", "json"),
                ("compare", "{REF}", "latest"), ("compare", "latest", "{REF}"), ("verdicts", "{REF}"),
                ("history", "{REF}"), ("hw", "measured", "--run", "{REF}"),
                ("recommend", "--workload", "cnn:alexnet", "--no-plot", "--run", "{REF}"),
                ("report", "{REF}", "--format", "markdown"),
                ("bundle", "export", "{REF}", "-o", "{OUT}")]


@budget(30)
@given(command=st.sampled_from(REF_COMMANDS), ref=S.run_refs)
def test_run_references(box: Sandbox, command: tuple[str, ...], ref: str) -> None:
    """Every command that takes a run reference, with `latest`, `latest~N`, RUN@MACHINE, prefixes of the real
    id and garbage: all only read the store (a bundle goes to a fresh file)."""
    ref = box.fill(ref)
    out = box.fresh("out.dlperf.json.gz")
    out.parent.mkdir(parents=True, exist_ok=True)
    args = [ref if a == "{REF}" else str(out) if a == "{OUT}" else a for a in command]
    read_only(box, *args)


# -- option values ------------------------------------------------------------------
#: Commands that only read, each with its numeric options (FLAG, then the command's other arguments).
READING_OPTIONS: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("plan", "{STUDY}"), ("--timeout", "--budget", "--steps", "--device", "--framework", "--format")),
    (("runs",), ("--limit",)),
    (("compare", "latest", "latest"), ("--min-effect", "--fail-on-regression")),
    (("history", "fuzz_tiny"), ("--min-effect", "--fail-on-regression", "--case", "--machine")),
    (("recommend", "--workload", "cnn:alexnet", "--no-plot"),
     ("--batch", "--image-size", "--target-samples-per-s", "--budget-usd", "--max-power-w", "--efficiency", "--top")),
    (("hw", "measured"), ("--tdp-w", "--price-usd")),
    (("show", "latest"), ("--case",)),
    (("export", "latest"), ("--format",)),
    (("report", "latest"), ("--format",)),
]


NAMED = {"--device", "--framework", "--format", "--case", "--machine"}


@budget(25)
@given(which=st.sampled_from(READING_OPTIONS), data=st.data())
def test_options_of_reading_commands(box: Sandbox, which: tuple, data: st.DataObject) -> None:
    """Out-of-range, non-finite, empty and garbage values (and valid ones) of the reading commands' options,
    one to three at a time."""
    base, flags = which
    args = [str(box.study) if a == "{STUDY}" else a for a in base]
    for flag in data.draw(st.lists(st.sampled_from(flags), min_size=1, max_size=3), label="flags"):
        args += [flag, data.draw(S.names if flag in NAMED else S.numbers, label=flag)]
    read_only(box, *args, regression_exit="--fail-on-regression" in args)


#: Commands that would run cases once their options pass, with the options a user gives them numbers.
EXECUTING_OPTIONS: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("run", "{STUDY}"), ("--timeout", "--budget", "--threads", "--steps", "--mem-limit", "--wait-idle",
                          "--max-cases", "--tdp-w")),
    (("maxbatch", "lenet5"), ("--start", "--max-batch", "--steps", "--timeout", "--image-size", "--mem-limit")),
    (("serve", "--quick"), ("--target-latency-ms", "--target-qps", "--max-batch", "--min-duration-s",
                            "--min-query-count", "--threads", "--timeout")),
]


@budget(20)
@given(which=st.sampled_from(EXECUTING_OPTIONS), data=st.data())
def test_invalid_options_of_executing_commands(box: Sandbox, which: tuple, data: st.DataObject) -> None:
    """`run`, `maxbatch` and `serve` with a value no numeric option accepts (not finite, negative, not a number,
    empty): refused in one line before anything is made, the store where --db points never created."""
    base, flags = which
    args = [str(box.study) if a == "{STUDY}" else a for a in base]
    flag = data.draw(st.sampled_from(flags), label="flag")
    args += [flag, data.draw(st.sampled_from(S.INVALID_NUMBERS), label=flag)]
    missing = box.fresh("never.sqlite")
    res = call_dlperf(*args, "--db", str(missing), cwd=box.cwd)
    check_outcome(res, store=missing, before=None)
    assert res.code != 0, f"an invalid value was accepted: {res.describe()}"


# -- the real entry point ------------------------------------------------------------
@budget(3)
@given(case=st.one_of(
    st.tuples(st.just("study"), S.study_texts()),
    st.tuples(st.just("ref"), S.run_refs),
    st.tuples(st.just("option"), st.sampled_from(S.INVALID_NUMBERS)),
))
def test_the_real_entry_point(box: Sandbox, case: tuple[str, Any]) -> None:
    """A few examples through `python -m dlperf` in a subprocess, as a user runs it (a time-out is a hang)."""
    kind, value = case
    if kind == "study":
        study = box.fresh("study.yaml")
        study.parent.mkdir(parents=True, exist_ok=True)
        study.write_bytes(value)
        args = ["plan", str(study)]
    elif kind == "ref":
        args = ["show", box.fill(value)]
    store, before = box.store, box.digest
    if kind == "option":  # it would run into the store, were the value taken: a store of its own
        args = ["run", str(box.study), "--budget", value]
        store = box.store_copy()
    proc = subprocess.run([sys.executable, "-m", "dlperf", *args, "--db", str(store)], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, COLUMNS="200"), cwd=box.cwd)
    res = Outcome((*args, "--db", str(store)), proc.returncode, proc.stdout, proc.stderr)
    check_outcome(res, store=store, before=before)
    assert store_digest(store) == before and (kind != "option" or res.code != 0), res.describe()
    box.no_escape()
