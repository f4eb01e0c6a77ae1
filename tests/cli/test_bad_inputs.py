"""Issue 14's acceptance, as a table: bad inputs of every kind (options, values, missing files, environment
variables, study content, run references, --db), each through the real `dlperf` command in-process. Each must end
with a non-zero exit, exactly one `dlperf: error: ...` line on stderr, no traceback anywhere, and a store that
already holds runs exactly as it was (same runs, statuses and result counts)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.cli.conftest import assert_one_line_error

GOOD_STUDY = "name: t\nworkload: ops\nframeworks: [numpy]\nparams: {op: add, size_mb: 1}\n"


@dataclass(frozen=True)
class Bad:
    """One bad input: the arguments (`{db}`, `{study}`, `{dir}` are filled in), the study file's text where
    `{study}` is used, environment variables, and a fragment the error line must contain."""

    args: tuple[str, ...]
    fragment: str
    study: str | bytes | None = None
    env: dict[str, str] = field(default_factory=dict)


BAD: dict[str, Bad] = {
    # options and their values
    "unknown option": Bad(("run", "smoke", "--colour", "red"), "No such option '--colour'"),
    "unknown command": Bad(("rnu", "smoke"), "No such command 'rnu'"),
    "budget zero": Bad(("run", "smoke", "--budget", "0"), "Invalid value for '--budget'"),
    "budget not a number": Bad(("run", "smoke", "--budget", "abc"), "'abc' is not a valid float"),
    "timeout nan": Bad(("run", "smoke", "--timeout", "nan"), "'nan' is not a finite number"),
    "budget inf": Bad(("run", "smoke", "--budget", "inf"), "'inf' is not a finite number"),
    "recommend budget nan": Bad(("recommend", "--workload", "cnn:alexnet", "--budget-usd", "nan"), "not a finite"),
    "recommend efficiency nan": Bad(("recommend", "--workload", "cnn:alexnet", "--efficiency", "nan"), "not a finite"),
    "hw measured tdp nan": Bad(("hw", "measured", "--tdp-w", "nan"), "'nan' is not a finite number"),
    "maxbatch image too small": Bad(("maxbatch", "lenet5", "--image-size", "1"), "too small"),
    "steps zero": Bad(("run", "smoke", "--steps", "0"), "Invalid value for '--steps'"),
    "negative memory cap": Bad(("run", "smoke", "--mem-limit", "-5"), "--mem-limit"),
    "memory cap below the import": Bad(("run", "smoke", "--quick", "--mem-limit", "2MiB", "--threads", "1"),
                                       "is below what a worker needs just to import"),
    "energy estimate without tdp": Bad(("run", "smoke", "--energy-estimate", "tdp"), "needs --tdp-w"),
    "unknown framework": Bad(("run", "smoke", "--framework", "tourch"), "unknown framework 'tourch'"),
    "unknown device": Bad(("run", "smoke", "--device", "gpu"), "--device gpu: unknown device"),
    "runs limit zero": Bad(("runs", "--limit", "0"), "Invalid value for '--limit'"),
    "min effect negative": Bad(("compare", "latest", "latest", "--min-effect", "-5"), "must be a finite percentage"),
    "fail-on-regression not a number": Bad(("compare", "latest", "latest", "--fail-on-regression", "abc"),
                                           "is not a percentage"),
    "report format": Bad(("report", "latest", "--format", "pdf"), "Invalid value for '--format'"),
    "recommend batch zero": Bad(("recommend", "--workload", "cnn:alexnet", "--batch", "0"), "--batch"),
    "recommend unknown model": Bad(("recommend", "--workload", "cnn:resnet"), "--workload must be FAMILY:MODEL"),
    "recommend kind": Bad(("recommend", "--workload", "cnn:alexnet", "--kind", "tpu"), "--kind"),
    "maxbatch unknown framework": Bad(("maxbatch", "alexnet", "--framework", "nope"), "unknown framework"),
    "maxbatch sets the axis itself": Bad(("maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p", "batch=4"),
                                         "-p batch sets the axis the search varies"),
    "maxbatch workload params": Bad(("maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p", "task=train"),
                                    "task train needs seq_len"),
    "maxbatch unknown workload param": Bad(("maxbatch", "cnn", "-p", "model=lenet5", "-p", "colour=red"),
                                           "colour: Extra inputs are not permitted"),
    "maxbatch param of the wrong type": Bad(("maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p",
                                             "seq_len=long"), "seq_len: Input should be a valid integer"),
    "maxbatch cnn option for a workload": Bad(("maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p",
                                               "seq_len=8", "--precision", "amp"), "--precision is for a CNN"),
    "maxbatch workload without an axis": Bad(("maxbatch", "ops"), "workload 'ops' has no memory axis"),
    "hw unknown device": Bad(("hw", "show", "no-such-gpu-9000"), "no-such-gpu-9000"),
    "serve unknown scenario": Bad(("serve", "--quick", "--scenario", "burst"), "unknown scenario 'burst'"),
    "serve target latency zero": Bad(("serve", "--quick", "--target-latency-ms", "0"), "--target-latency-ms"),
    "serve unknown model": Bad(("serve", "resnet152", "--quick"), "unknown model 'resnet152'"),
    "serve target latency past LoadGen's": Bad(("serve", "--quick", "--target-latency-ms", "1e300"),
                                               "--target-latency-ms"),
    "maxbatch framework without the workload": Bad(("maxbatch", "lenet5", "--framework", "numpy"),
                                                   "workload 'cnn' has no numpy implementation"),
    "dask scheduler not an address": Bad(("run", "smoke", "--quick", "--executor", "dask", "--scheduler", "notaurl"),
                                         "--scheduler notaurl: not a Dask scheduler address"),
    # missing or unusable files
    "missing study": Bad(("run", "{dir}/nope.yaml"), "study file not found"),
    "export to a missing folder": Bad(("export", "latest", "-o", "{dir}/no/such/out.csv"), "cannot write"),
    "export onto a folder": Bad(("export", "latest", "-o", "{dir}"), "-o"),
    "export to a full disk": Bad(("export", "latest", "--format", "json", "-o", "/dev/full"), "No space left"),
    # study content
    "empty study file": Bad(("run", "{study}"), "t.yaml", study=""),
    "study is a list": Bad(("run", "{study}"), "t.yaml", study="- a\n- b\n"),
    "study is a scalar": Bad(("run", "{study}"), "t.yaml", study="just words\n"),
    "unknown workload": Bad(("run", "{study}"), "workload", study=GOOD_STUDY.replace("ops", "opz")),
    "unknown op": Bad(("run", "{study}"), "op", study=GOOD_STUDY.replace("op: add", "op: frobnicate")),
    "negative size": Bad(("run", "{study}"), "size_mb", study=GOOD_STUDY.replace("size_mb: 1", "size_mb: -1")),
    "unknown param": Bad(("run", "{study}"), "colour", study=GOOD_STUDY.replace("op: add", "op: add, colour: 1")),
    "timeout as text": Bad(("run", "{study}"), "timeout_s", study=GOOD_STUDY + "timeout_s: soon\n"),
    "zero repetitions": Bad(("run", "{study}"), "repetitions", study=GOOD_STUDY + "repetitions: 0\n"),
    "unknown key in quick": Bad(("run", "{study}", "--quick"), "colour", study=GOOD_STUDY + "quick: {colour: 1}\n"),
    "unknown device in study": Bad(("run", "{study}"), "devices", study=GOOD_STUDY + "devices: [tpu]\n"),
    "params not a mapping": Bad(("run", "{study}"), "params", study=GOOD_STUDY.replace("{op: add, size_mb: 1}",
                                                                                     "[1, 2]")),
    "name with a slash": Bad(("run", "{study}"), "name", study=GOOD_STUDY.replace("name: t", "name: ../x")),
    "frameworks not a list": Bad(("run", "{study}"), "frameworks", study=GOOD_STUDY.replace("[numpy]", "numpy")),
    "unknown dtype": Bad(("run", "{study}"), "dtype", study=GOOD_STUDY.replace("op: add", "op: add, dtype: float8")),
    "exclude not a list": Bad(("run", "{study}"), "exclude", study=GOOD_STUDY + "exclude: 5\n"),
    "study memory cap below the import": Bad(("run", "{study}"), "the study's mem_limit_mb: 1 is below",
                                             study=GOOD_STUDY + "mem_limit_mb: 1\nthreads: 1\n"),
    "tab-indented yaml": Bad(("run", "{study}"), "YAML syntax error", study="name: t\n\tworkload: ops\n"),
    "binary study": Bad(("run", "{study}"), "not a UTF-8 text file", study=b"\x00\xff\xfe binary"),
    "study timeout inf": Bad(("run", "{study}"), "timeout_s: Input should be a finite number",
                             study=GOOD_STUDY + "timeout_s: .inf\n"),
    "study budget nan": Bad(("run", "{study}"), "budget_s: Input should be a finite number",
                            study=GOOD_STUDY + "budget_s: .nan\n"),
    "study size nan": Bad(("plan", "{study}"), "size_mb: Input should be a finite number",
                          study=GOOD_STUDY.replace("size_mb: 1", "size_mb: [.nan]")),
    "study threads beyond the cores": Bad(("run", "{study}"), "threads: 100000 in the study file",
                                          study=GOOD_STUDY + "threads: 100000\n"),
    "study is a device": Bad(("run", "/dev/null"), "not a regular file"),
    "empty grid": Bad(("run", "{study}"), "t.yaml", study=GOOD_STUDY.replace("size_mb: 1", "size_mb: []")),
    "exclude removes every case": Bad(("run", "{study}"), "t.yaml", study=GOOD_STUDY + "exclude: [{op: add}]\n"),
    "grid of a million cases": Bad(("run", "{study}"), "--max-cases",
                                   study=GOOD_STUDY.replace("size_mb: 1", "size_mb: {sizes}")),
    "plan of a missing study": Bad(("plan", "{dir}/nope.yaml"), "study file not found"),
    "absent cuda device": Bad(("run", "smoke", "--quick", "--device", "cuda:7"), "cuda:7"),
    # run references
    "unknown run": Bad(("show", "nope"), "unknown run 'nope'"),
    "empty run reference": Bad(("export", ""), "an empty run reference"),
    "unknown run to compare": Bad(("compare", "latest", "nope"), "unknown run 'nope'"),
    "unknown run to resume": Bad(("run", "smoke", "--resume", "nope"), "unknown run 'nope'"),
    "unknown run to calibrate on": Bad(("recommend", "--workload", "cnn:alexnet", "--run", "nope"), "nope"),
    "resume of another study": Bad(("run", "smoke", "--quick", "--resume", "latest"), "cannot be resumed"),
    "unknown case": Bad(("show", "latest", "--case", "ops/tourch"), "--case 'ops/tourch': no case of run"),
    "empty case": Bad(("show", "latest", "--case", ""), "--case '': no case of run"),
    # the replication report, verdicts, history and the machine matrix
    "verdicts of an unknown run": Bad(("verdicts", "nope"), "unknown run 'nope'"),
    "html report into a full disk": Bad(("report", "latest", "--format", "html", "-o", "/dev/full"), "cannot write"),
    "html report into a folder": Bad(("report", "latest", "--format", "html", "-o", "{dir}"), "is a directory"),
    "two runs as markdown": Bad(("report", "latest", "latest", "--format", "markdown"), "reports one RUN"),
    "history of an unknown study": Bad(("history", "nosuch"), "no runs of study 'nosuch'"),
    "history of an unknown machine": Bad(("history", "many_ok", "--machine", "ffff"), "matches no machine"),
    "history of an unknown case": Bad(("history", "many_ok", "--case", "zzz"), "--case 'zzz'"),
    "history gate nan": Bad(("history", "many_ok", "--fail-on-regression", "nan"), "finite percentage"),
    "history min effect negative": Bad(("history", "many_ok", "--min-effect", "-1"), "finite percentage"),
    "history page into a folder": Bad(("history", "many_ok", "--format", "html", "-o", "{dir}"), "is a directory"),
    "matrix of an unknown study": Bad(("matrix", "nosuch"), "no runs of study 'nosuch'"),
    "matrix unknown format": Bad(("matrix", "many_ok", "--format", "pdf"), "'pdf' is not one of"),
    # environment variables
    "clock override not a number": Bad(("run", "smoke", "--quick"), "DLPERF_CPU_CLOCK_GHZ",
                                       env={"DLPERF_CPU_CLOCK_GHZ": "abc"}),
    "negative clock override": Bad(("run", "smoke", "--quick"), "DLPERF_CPU_CLOCK_GHZ",
                                   env={"DLPERF_CPU_CLOCK_GHZ": "-3"}),
    "clock override inf": Bad(("hw", "show"), "DLPERF_CPU_CLOCK_GHZ='inf' is not a finite number",
                              env={"DLPERF_CPU_CLOCK_GHZ": "inf"}),
    "fma units fraction": Bad(("hw", "show"), "DLPERF_CPU_FMA_UNITS='1.5' must be a whole number",
                              env={"DLPERF_CPU_FMA_UNITS": "1.5"}),
    "fma units zero": Bad(("run", "smoke", "--quick"), "DLPERF_CPU_FMA_UNITS", env={"DLPERF_CPU_FMA_UNITS": "0"}),
    "DLPERF_DB typo": Bad(("show", "latest"), "no results store at", env={"DLPERF_DB": "{dir}/reslts.sqlite"}),
    # --db
    "db typo": Bad(("runs", "--db", "{dir}/reslts.sqlite"), "no results store at"),
    "db is a folder": Bad(("show", "latest", "--db", "{dir}"), "{dir}"),
    "db is a text file": Bad(("runs", "--db", "{dir}/notes.txt"), "is not a SQLite database"),
    "db unknown url scheme": Bad(("runs", "--db", "nosuchdb://host/x"), "nosuchdb"),
}


def _snapshot(db: Path) -> list[tuple]:
    """What the store holds: each run's id, status and case count, and the results per run and status."""
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            runs = conn.execute(text("SELECT id, status, n_cases FROM runs ORDER BY id")).fetchall()
            results = conn.execute(text("SELECT run_id, status, count(*) FROM results GROUP BY run_id, status "
                                        "ORDER BY run_id, status")).fetchall()
    finally:
        engine.dispose()
    return [tuple(r) for r in runs] + [tuple(r) for r in results]


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_input_is_one_line_and_changes_nothing(name, dlperf_main, two_runs, tmp_path, monkeypatch):
    bad = BAD[name]
    source, _, _ = two_runs
    db = tmp_path / "store.sqlite"
    shutil.copy(source, db)
    before = _snapshot(db)
    assert len(before) >= 4  # two runs and their results

    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a database\n")
    study = folder / "t.yaml"
    if isinstance(bad.study, bytes):
        study.write_bytes(bad.study)
    elif bad.study is not None:
        study.write_text(bad.study.replace("{sizes}", "[" + ", ".join(str(1 + i) for i in range(6000)) + "]"))

    def fill(s: str) -> str:
        return s.replace("{db}", str(db)).replace("{study}", str(study)).replace("{dir}", str(folder))

    for key, value in bad.env.items():
        monkeypatch.setenv(key, fill(value))
    res = dlperf_main(*(fill(a) for a in bad.args), db=None if "DLPERF_DB" in bad.env or "--db" in bad.args
                      else db)
    assert_one_line_error(res, fill(bad.fragment))
    assert _snapshot(db) == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(["notes.txt", *(["t.yaml"] if bad.study is not None
                                                                                 else [])])
    assert (folder / "notes.txt").read_text() == "not a database\n"


def test_the_table_is_large_and_varied():
    assert len(BAD) >= 25
    assert len({b.args[0] for b in BAD.values()}) >= 8  # run, show, export, compare, report, runs, recommend, ...


@pytest.mark.parametrize("args", [("maxbatch", "lenet5", "--image-size", "1"), ("maxbatch", "lenet5", "--start", "0"),
                                  ("maxbatch", "transformer", "-p", "model=gpt2-tiny"),
                                  ("maxbatch", "cnn", "-p", "model=lenet5", "-p", "batch=2"),
                                  ("maxbatch", "transformer", "-p", "model=gpt2-tiny", "-p", "seq_len=8", "--device",
                                   "cuda:7"),
                                  ("run", "{study}", "--quick"), ("run", "smoke", "--device", "cuda:7"),
                                  ("maxbatch", "lenet5", "--framework", "numpy"),
                                  ("run", "smoke", "--quick", "--executor", "dask", "--scheduler", "notaurl"),
                                  ("serve", "--quick", "--target-latency-ms", "1e300")],
                         ids=["maxbatch image", "maxbatch start", "maxbatch params", "maxbatch axis",
                              "maxbatch absent device", "bad study", "absent device", "maxbatch framework",
                              "dask scheduler", "serve latency"])
def test_a_refused_command_creates_no_store(dlperf_main, tmp_path, args):
    study = tmp_path / "t.yaml"
    study.write_text(GOOD_STUDY + "timeout_s: .inf\n")
    db = tmp_path / "new.sqlite"
    res = dlperf_main(*(a.replace("{study}", str(study)) for a in args), db=db)
    assert res.returncode != 0 and "Traceback" not in res.stderr + res.stdout
    assert not db.exists()


def test_another_programs_sqlite_database_is_refused_untouched(dlperf_main, tmp_path):
    import sqlite3

    db = tmp_path / "foreign.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = db.read_bytes()
    for args in (("runs",), ("run", "smoke", "--quick")):
        assert_one_line_error(dlperf_main(*args, db=db), "is not a dlperf database")
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["foreign.sqlite"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL


def test_a_read_command_leaves_an_empty_file_empty(dlperf_main, tmp_path):
    db = tmp_path / "empty.sqlite"
    db.write_bytes(b"")
    assert_one_line_error(dlperf_main("runs", db=db), "is an empty file, not a results store")
    assert db.stat().st_size == 0


@pytest.mark.parametrize("command", [("run", "smoke", "--quick"), ("serve", "--quick")], ids=["run", "serve"])
def test_resume_is_checked_before_the_store_or_the_threads_line(command, dlperf_main, two_runs, tmp_path):
    """--resume of no run (in a store file that does not exist, or in one that does) and of a run of another study:
    one line, exit 2, no store file created, no "threads:" line printed before the error."""
    missing = tmp_path / "none.sqlite"
    res = dlperf_main(*command, "--resume", "nosuchrun", db=missing)
    assert_one_line_error(res, "--resume nosuchrun: no such run")
    assert res.returncode == 2 and "threads:" not in res.stdout and not missing.exists()
    db = tmp_path / "r.sqlite"
    shutil.copy(two_runs[0], db)
    before = _snapshot(db)
    res = dlperf_main(*command, "--resume", "nosuchrun", db=db)
    assert_one_line_error(res, "--resume nosuchrun: unknown run 'nosuchrun'")
    assert res.returncode == 2 and "threads:" not in res.stdout
    other = "cannot be resumed with smoke (quick)" if command[0] == "run" else "not of dlperf serve's serving study"
    res = dlperf_main(*command, "--resume", "latest", db=db)
    assert_one_line_error(res, other)
    assert res.returncode == 2 and "threads:" not in res.stdout and _snapshot(db) == before
