"""The examples of README.md and docs/*.md, tested: every study YAML block loads, every command shown runs, and the
output they show for a command has the shape of what that command prints now.

Which files: README.md, then every docs/*.md by name (readme_examples.documents), read in that order as one text;
a place is named `FILE:LINE` (`docs/studies.md:12`). "The README" below means all of them.
What is taken from them (fenced blocks only; prose is not read):
- ```yaml blocks: a mapping with `workload:` is a study file and must load with the project's loader (full and,
  where it has one, quick variant) into at least one case; any other YAML must parse, and a fragment made only of
  study keys (e.g. `exclude:`) must load when put into at least one shipped study.
- ```bash / ```console / ```text / bare ``` blocks: an unindented line that starts with `dlperf` (or `$ dlperf`, or
  a path ending in `/dlperf` such as `.venv/bin/dlperf`) is a command. New README commands are picked up as they are
  written. Lines after a command in the same block, up to the next command, are what the README shows it printing
  (blank and `#` lines aside): they must match the real output line by line with numbers, run ids, units and
  machine-dependent words masked (test_shown_output_matches). A `...` line leaves out any number of lines; a command
  shown with output in several places is compared at each; box rules and the wrapped second lines of table rows are
  not compared; cells of `note`, `flags`, `check` and `energy/call` (measured only where a meter exists) are not
  compared; lines that depend on the machine (`threads:`, `validity:`, and indented lines such as ` CPU: ...`)
  compare their label; lines printed on some runs only (OPTIONAL: `energy:` per meter that could not measure, the
  ops tables' legend of validity marks, roofline flag notes, a narrow table's numbered notes `[1] ...`) are not
  compared; lines that mask alike in a row count once (cache levels differ).
- A block fenced inside a list item (an indented fence) is read with that indent removed (the fleet's commands).
- Not taken: ```python blocks (the timer's uses a placeholder `fn`), and a block with no command line (the ops
  report excerpt, which shows no command to run).
- How a line is expanded: `[--opt value]` is optional: measuring commands (run, peaks, maxbatch) run once with
  every option shown; the others also run once without them. `[words]` without a leading `-` describe, and are
  dropped. `a|b` runs each alternative. Identical commands run once, at their first place.

Excluded (not run), each with its reason (EXCLUDED_MAKE; any other `make` line in the README fails this test):
- `make run`: creates .venv and installs from the network; its dlperf command is the sample session's
  `.venv/bin/dlperf run smoke --quick`, which runs here.
- `make test`: the whole suite, this test included (recursion), after installing every framework.
- `make gpu-check` (if the README ever shows it in a block): needs an NVIDIA GPU; tests/cli/test_gpu_check.py
  tests it.
- `make bench`: speed benchmarks that take minutes and print ratios; not a pass/fail check.

Substitutions (SUBSTITUTIONS; a placeholder the table does not know fails with the README line):
RUN -> the latest run's id; RUN_A, RUN_B -> the two latest runs of the latest run's study (older, newer; one
run: both); FILE -> a new file in the session folder; SECONDS -> 0.2; STUDY -> tests/studies/readme_ops.yaml;
N -> 100; KEY -> a case key of the latest run.
Paths under `examples/` are written from the repository's root, as a user runs them there: the session folder
has an `examples` link to the repository's examples/ (read only; the commands still run in the session folder).
Shipped studies run on a tiny stand-in with the same workload (STAND_INS: `dlperf run ops --quick` runs
tests/studies/readme_ops.yaml --quick), except where the README shows the command's output: the sample session's
`dlperf run smoke --quick` runs the real study (about 20 s here). SPEEDUPS adds `--budget 0.2` to `run` (not to the
run whose output the README shows), `--quick --framework numpy` to `peaks`, `--image-size 64 --max-batch 1
--steps 1` to `maxbatch` (AlexNet at 227 px searched up to a 2 GiB cap takes minutes; `--image-size` only where the
target is a CNN model: a workload target takes -p), and `--framework torch --min-duration-s 1` to `serve` (every
LoadGen run of the quick serving study would otherwise last its 2 s); `--threads 2` becomes at most the logical
cores; `--budget 0.2` is added to `bench` (its example runs six cases).
Commands run in reading order (README.md, then docs/*.md by name), in this process (tests/cli/conftest.py's way),
against one temporary store that earlier commands filled; `run` still starts its worker processes. Exit status 0
and some output are required, except where EXPECTED_EXIT documents another status.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import signal
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from tests.cli.readme_examples import (
    ROOT,
    Block,
    Planned,
    Shown,
    document_blocks,
    mask,
    plan,
    shape_mismatch,
    shown_commands,
)
from tests.conftest import STUDIES

EXCLUDED_MAKE = {
    "run": "creates .venv from the network; its `.venv/bin/dlperf run smoke --quick` runs here",
    "test": "the whole suite, this test included",
    "gpu-check": "needs an NVIDIA GPU (tests/cli/test_gpu_check.py tests it)",
    "bench": "minutes of speed benchmarks that print ratios, not a pass/fail check",
}
STAND_INS = {name: STUDIES / f"readme_{name}.yaml"
             for name in ("smoke", "ops", "mlp", "cnn", "backends", "peaks", "transformer", "inference",
                          "inference_transformer", "serving", "ddp", "collectives", "compilers", "compilers_xla",
                          "compilers_xla_transformer")}
REAL_STUDIES: set[str] = set()  # shipped studies short enough to run as the README shows them everywhere
SPEEDUPS = {"run": [("--budget", "0.2")],  # not for a run whose output the README shows: that one is real
            "peaks": [("--quick", ""), ("--framework", "numpy")],
            "maxbatch": [("--image-size", "64"), ("--max-batch", "1"), ("--steps", "1")],
            "serve": [("--framework", "torch"), ("--min-duration-s", "1")],
            "bench": [("--budget", "0.2")]}
#: SPEEDUPS options only a CNN model's `maxbatch` takes (a workload target gets its parameters from -p).
CNN_ONLY = {"--image-size"}
CNN_MODELS = {"alexnet", "caffenet", "googlenet", "lenet5"}
SUBSTITUTIONS = {"RUN", "RUN_A", "RUN_B", "FILE", "SECONDS", "STUDY", "N", "KEY"}
# (a test on the argv, the exit statuses the README documents, why)
EXPECTED_EXIT = [(lambda argv: argv[0] == "compare" and "--fail-on-regression" in argv, {0, 1},
                  "compare --fail-on-regression exits 1 when a case is slower beyond the limit or cannot be checked"),
                 (lambda argv: argv[0] == "history" and "--fail-on-regression" in argv, {0, 1},
                  "history --fail-on-regression exits 1 when the newest run is slower or cannot be checked (it fails "
                  "closed on a contended run, which a busy CI machine makes)")]


#: README commands that are not run here, each with its reason and the test that runs exactly that setup instead:
#: (a test on the argv, the reason). Any other dlperf line in the README runs.
EXCLUDED_DLPERF = [
    (lambda argv: argv[:2] in (["fleet", "scheduler"], ["fleet", "worker"]),
     "a Dask scheduler or worker: a server that runs until stopped; tests/fleet/test_fleet.py starts both (a "
     "scheduler and two labelled workers) and stops them"),
    (lambda argv: "--executor" in argv and "dask" in argv,
     "needs a live Dask scheduler and a PostgreSQL server (HOST, DBHOST); tests/fleet/test_fleet.py runs this "
     "command against its own scheduler, workers and PostgreSQL"),
]
BLOCKS = document_blocks()
EXCLUDED = [p for p in plan(BLOCKS) if any(test(p.template) for test, _ in EXCLUDED_DLPERF)]
PLANNED = [p for p in plan(BLOCKS) if p not in EXCLUDED]


def value_options(command: str) -> set[str]:
    """The options of `dlperf COMMAND` that take a value (so the token after them is not the positional)."""
    import click

    from dlperf.cli import cli

    found = cli.commands.get(command)
    return {o for p in getattr(found, "params", []) if isinstance(p, click.Option) and not p.is_flag
            for o in p.opts}


class Session:
    """The README's commands run in order against one store; each outcome kept."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.db = folder / "readme.sqlite"
        self.outcomes: dict[int, tuple[list[str], int, str, str, Path | None, float]] = {}

    def store(self):  # -> dlperf.store.Store, imported late
        from dlperf.store import Store

        if not self.db.is_file():
            raise AssertionError("a placeholder needs a run, and the README runs none before this command")
        return Store(str(self.db))

    def substitute(self, item: Planned, argv: list[str], variant: str) -> tuple[list[str], Path | None]:
        out: list[str] = []
        file: Path | None = None
        for tok in argv:
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", tok):
                out.append(tok)
                continue
            if tok not in SUBSTITUTIONS:
                raise AssertionError(f"{item.shown.where}: `{item.shown.text}` has the placeholder {tok}, "
                                     f"which SUBSTITUTIONS in tests/cli/test_readme.py does not know")
            if tok == "FILE":
                file = self.folder / f"{Path(item.shown.source).stem}-L{item.shown.line_no}-{variant}.out"
                out.append(str(file))
            elif tok in ("SECONDS", "N", "STUDY"):
                out.append({"SECONDS": "0.2", "N": "100", "STUDY": str(STAND_INS["ops"])}[tok])
            else:
                store = self.store()
                latest = store.run("latest")
                ids = [r.id for r in store.runs_of_study(latest.study)]
                out.append({"RUN": latest.id, "RUN_B": ids[0], "RUN_A": ids[min(1, len(ids) - 1)]}.get(tok)
                           or store.results(latest.id)[0].case_key)
        return out, file

    def prepare(self, item: Planned, index: int) -> tuple[list[str], Path | None]:
        argv, file = self.substitute(item, list(item.template), str(index))
        command = argv[0] if argv else ""
        if command == "run":
            values = value_options("run")
            pos = next(i for i in range(1, len(argv)) if not argv[i].startswith("-") and argv[i - 1] not in values)
            name = argv[pos]
            from dlperf.studies.loader import shipped_studies

            if item.shows_output:  # the README shows what it prints: it runs as shown
                pass
            elif name in STAND_INS:
                argv[pos] = str(STAND_INS[name])
            elif name in shipped_studies() and name not in REAL_STUDIES:
                raise AssertionError(f"{item.shown.where}: `{item.shown.text}` runs the shipped study "
                                     f"{name!r}: give it a tiny stand-in in STAND_INS (tests/studies/readme_{name}"
                                     f".yaml) or list it in REAL_STUDIES")
        if "--threads" in argv:
            at = argv.index("--threads") + 1
            argv[at] = str(min(int(argv[at]), os.cpu_count() or 1))
        for opt, value in [] if item.shows_output else SPEEDUPS.get(command, []):
            if opt in CNN_ONLY and command == "maxbatch" and argv[1] not in CNN_MODELS:
                continue  # `maxbatch WORKLOAD -p ...` takes its workload's own parameters, not a CNN's options
            if opt not in argv:
                argv += [opt, value] if value else [opt]
        return argv, file

    def outcome(self, index: int) -> tuple[list[str], int, str, str, Path | None, float]:
        for i in range(index + 1):
            if i not in self.outcomes:
                try:
                    self.outcomes[i] = self.call(i)
                except AssertionError as exc:  # the line cannot be run as written (its own test says why)
                    where = f"{PLANNED[i].shown.where}: `{PLANNED[i].shown.text}`: "
                    message = str(exc) if str(exc).startswith(PLANNED[i].shown.where) else where + str(exc)
                    self.outcomes[i] = (PLANNED[i].template, -1, "", message, None, 0.0)
        return self.outcomes[index]

    def call(self, index: int) -> tuple[list[str], int, str, str, Path | None, float]:
        from dlperf.cli import main

        argv, file = self.prepare(PLANNED[index], index)
        out, err = io.StringIO(), io.StringIO()
        handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
        start = time.perf_counter()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGHUP, handlers[1])
        return argv, code, out.getvalue(), err.getvalue(), file, time.perf_counter() - start


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A scratch folder (reports/ land there; `examples` links to the repository's), wide output (no line folds),
    DLPERF_DB set to a new store."""
    folder = tmp_path_factory.mktemp("readme")
    with pytest.MonkeyPatch.context() as mp:
        (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
        mp.chdir(folder)
        mp.setenv("COLUMNS", "1000")
        mp.setenv("DLPERF_DB", str(folder / "readme.sqlite"))
        yield Session(folder)


# -- study files -------------------------------------------------------------------------------------------------

YAML_BLOCKS = [b for b in BLOCKS if b.lang in ("yaml", "yml")]


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=[b.where for b in YAML_BLOCKS])
def test_yaml_block_validates(block: Block, tmp_path: Path) -> None:
    from dlperf.errors import StudyError
    from dlperf.studies import load_study
    from dlperf.studies.loader import shipped_studies
    from dlperf.studies.schema import StudyFile

    text = "\n".join(block.lines) + "\n"
    where = block.where
    data = yaml.safe_load(text)
    path = tmp_path / "example.yaml"
    if isinstance(data, dict) and "workload" in data:
        path.write_text(text, encoding="utf-8")
        variants = [False, True] if data.get("quick") is not None else [False]
        for quick in variants:
            try:
                study = load_study(str(path), quick=quick)
            except StudyError as exc:
                pytest.fail(f"{where}: the README's study example does not load{' (--quick)' * quick}: {exc}")
            assert study.cases, f"{where}: the study example expands to no case{' (--quick)' * quick}"
    elif isinstance(data, dict) and set(data) <= set(StudyFile.model_fields):
        errors = []
        for name, shipped in shipped_studies().items():
            merged = {**yaml.safe_load(shipped.read_text(encoding="utf-8")), **data}
            path.write_text(yaml.safe_dump(merged), encoding="utf-8")
            try:
                assert load_study(str(path)).cases
                return
            except (StudyError, AssertionError) as exc:
                errors.append(f"{name}: {exc}")
        pytest.fail(f"{where}: this study fragment loads in no shipped study: {'; '.join(errors)}")


def test_every_shipped_study_is_real_or_has_a_stand_in() -> None:
    """A README line may run any shipped study: each is short enough (REAL_STUDIES) or has a tiny stand-in."""
    from dlperf.studies import load_study
    from dlperf.studies.loader import shipped_studies

    assert set(shipped_studies()) == REAL_STUDIES | set(STAND_INS)
    for name, path in STAND_INS.items():
        for quick in (False, True):
            study = load_study(str(path), quick=quick)
            assert study.workload == load_study(name).workload and 1 <= len(study.cases) <= 2, path
    common = {c.key for c in load_study("smoke", quick=True).cases} & {c.key for c in load_study(
        str(STAND_INS["smoke"]), quick=True).cases}
    assert common, "the smoke stand-in shares no case with the real smoke study: compare would have nothing to compare"


def test_make_lines_are_excluded_with_a_reason() -> None:
    for where, text in shown_commands(BLOCKS)[1]:
        target = text.split()[1] if len(text.split()) > 1 else ""
        assert target in EXCLUDED_MAKE, (f"{where}: `{text}` is neither run by this test nor excluded "
                                         f"with a reason in EXCLUDED_MAKE")


def test_excluded_commands_are_run_by_their_own_test() -> None:
    """Every README dlperf line left out here names the test that runs it, and that test exists."""
    for item in EXCLUDED:
        reasons = [why for test, why in EXCLUDED_DLPERF if test(item.template)]
        assert reasons, item.shown.text
        for why in reasons:
            named = re.search(r"tests/[\w/]+\.py", why)
            assert named and (ROOT / named.group(0)).is_file(), why


# -- commands ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("index", range(len(PLANNED)), ids=[p.label for p in PLANNED])
def test_readme_command_runs(session: Session, index: int) -> None:
    item = PLANNED[index]
    argv, code, out, err, file, seconds = session.outcome(index)
    if code == -1:
        pytest.fail(err)
    expected = next((codes for test, codes, _ in EXPECTED_EXIT if test(argv)), {0})
    where = (f"{item.shown.where}: `{item.shown.text}` (run as `dlperf {shlex.join(argv)}`, "
             f"{seconds:.1f} s)")
    assert code in expected, (f"{where} exited {code}, expected {sorted(expected)}\nstderr:\n{err}\n"
                              f"stdout:\n{out[-3000:]}")
    wrote = file is not None and file.is_file() and file.stat().st_size > 0
    assert out.strip() or wrote, f"{where} printed nothing{' and wrote no ' + str(file) if file else ''}\n{err}"
    assert "Traceback" not in out + err, f"{where} printed a traceback:\n{err}"


#: (index into PLANNED, a place that shows the command's output): every such place, the first and any later one.
SHOWN = [(i, place) for i, p in enumerate(PLANNED) for place in p.places if place.output]


@pytest.mark.parametrize(("index", "place"), SHOWN, ids=[f"{place.where}: dlperf {' '.join(PLANNED[i].template)}"
                                                      for i, place in SHOWN])
def test_shown_output_matches(session: Session, index: int, place: Shown) -> None:
    """The README's sample of what a command prints has the shape of what it prints now (numbers masked)."""
    _, code, out, err, _, _ = session.outcome(index)
    assert code == 0, f"{place.where}: `{place.text}` failed ({code}): {err}"
    problem = shape_mismatch(place, out)
    assert problem is None, f"{problem}\nthe command printed:\n{out}"


def test_mask_keeps_words_and_drops_numbers() -> None:
    """The comparison sees the same line for two runs that differ only in numbers, ids and units."""
    a = "[3/12] ops/numpy/cpu/dtype=float32,op=add,size_mb=12.0: ok median 108 us (IQR 3.3%, n=151)"
    b = "[3/12] ops/numpy/cpu/dtype=float32,op=add,size_mb=12.0: ok median 1.2 ms (IQR 14%, n=1,151)"
    assert mask(a) == mask(b) and "median T" in mask(a)
    assert mask("run smoke-20261123-005455-2b3e - study smoke (quick), complete") == \
        "run RUN - study smoke (quick), complete"
    assert mask("run x: complete") != mask("run x: interrupted")
    shown = Shown(1, "dlperf x", [(2, "head 1"), (3, "..."), (4, "tail 2")])
    assert shape_mismatch(shown, "head 7\nmiddle\ntail 3\n") is None
    assert "README.md:4" in str(shape_mismatch(shown, "head 7\nmiddle\nother 3\n"))
    assert "README.md:2" in str(shape_mismatch(Shown(1, "dlperf x", [(2, "head 1")]), "head 1\nmore\n"))


def test_a_busy_machines_numbered_notes_are_not_compared() -> None:
    """A narrow run table on a busy machine ends with numbered notes (`[1] other processes used ...`) that an idle
    machine does not print: they are optional on both sides; a progress line's `[1/12]` is still compared."""
    shown = Shown(1, "dlperf x", [(2, "table end"), (3, "12 of 12 cases stored")])
    assert shape_mismatch(shown, "table end\n[1] other processes used 1.01 cores while it ran\n"
                                 "12 of 12 cases stored\n") is None
    progress = Shown(1, "dlperf x", [(2, "[1/12] ops: ok"), (3, "done")])
    assert "README.md:3" in str(shape_mismatch(progress, "[1/12] ops: ok\n[2/12] mlp: ok\ndone\n"))

