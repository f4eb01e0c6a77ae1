"""Bad input, in-process: usage errors through click's CliRunner, and through `main` the one-line error and the
exit code a user gets for each (bad study files, unknown runs, a store from a newer dlperf, refused resumes)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from dlperf.cli import cli
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error
from tests.conftest import STUDIES


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    good = "name: t\nworkload: ops\nframeworks: [numpy]\nparams: {op: add, size_mb: 1}\n"
    (d / "syntax.yaml").write_text("name: t\nworkload: [ops\n")
    (d / "unknown_key.yaml").write_text(good + "colour: red\n")
    (d / "unknown_fw.yaml").write_text(good.replace("[numpy]", "[numpy, mxnet]"))
    (d / "negative.yaml").write_text(good + "repetitions: -1\n")
    return d


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("syntax.yaml", ["syntax.yaml:", "YAML syntax error"]),
        ("unknown_key.yaml", ["colour: unknown key"]),
        ("unknown_fw.yaml", ["frameworks[1]: unknown framework 'mxnet'"]),
        ("negative.yaml", ["repetitions: Input should be greater than 0"]),
        ("missing.yaml", ["missing.yaml: study file not found"]),
    ],
)
def test_bad_study_file(dlperf_main, bad_dir, tmp_path, name, fragments):
    db = tmp_path / "r.sqlite"
    res = dlperf_main("run", str(bad_dir / name), db=db)
    assert_one_line_error(res, *fragments)
    assert res.returncode == 2


def test_database_from_newer_dlperf(dlperf_main, tmp_path):
    db = tmp_path / "r.sqlite"
    Store(db)  # creates the schema
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE dlperf_meta SET value='7' WHERE key='schema_version'"))
    engine.dispose()
    assert_one_line_error(dlperf_main("show", "latest", db=db), "schema version 7, newer than this dlperf reads")


def test_unknown_run_and_usage_errors(dlperf_main, tmp_path):
    db = tmp_path / "r.sqlite"
    Store(db)  # an empty store: no runs yet
    assert_one_line_error(dlperf_main("show", "latest", db=db), "no runs in")
    assert_one_line_error(dlperf_main("show", "nope", db=db), "unknown run 'nope'")
    assert_one_line_error(dlperf_main("run", "smoke", "--framework", "tourch", db=db), "unknown framework 'tourch'")
    assert_one_line_error(dlperf_main("run", "smoke", "--timeout", "-1", db=db), "--timeout")
    assert_one_line_error(dlperf_main("frobnicate", db=db), "No such command")
    assert_one_line_error(dlperf_main("export", "x", "--format", "xml", db=db), "--format")


def test_usage_errors_name_the_command_to_ask_for_help(dlperf_main):
    res = dlperf_main("frobnicate")
    assert res.returncode == 2 and res.stderr.rstrip().endswith("(see 'dlperf --help')")
    res = dlperf_main("hw", "compare", "l4")
    assert_one_line_error(res, "compare needs at least two devices", "(see 'dlperf hw compare --help')")
    assert res.returncode == 2


def test_bad_memory_size(dlperf_main):
    res = dlperf_main("maxbatch", "alexnet", "--mem-limit", "lots")
    assert_one_line_error(res, "Invalid value for '--mem-limit': 'lots' is not a memory size "
                               "(e.g. 2GiB, 512MiB, or MiB as a number)")
    assert res.returncode == 2
    assert_one_line_error(dlperf_main("run", "smoke", "--mem-limit", "0.5"), "'0.5' is less than 1 MiB")


def test_unwritable_database_location(dlperf_main, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_one_line_error(dlperf_main("run", "smoke", "--quick", "--db", str(blocker / "sub" / "r.sqlite")),
                          "cannot create the folder")


@pytest.mark.parametrize("command", [["runs"], ["show", "latest"], ["report", "latest"], ["export", "latest"],
                                     ["compare", "a", "b"], ["hw", "measured"]])
def test_read_only_commands_never_create_a_store(dlperf_main, tmp_path, command):
    typo = tmp_path / "reslts.sqlite"
    assert_one_line_error(dlperf_main(*command, "--db", str(typo)), "no results store at", "check --db")
    assert not typo.exists()


def test_resume_of_another_study_is_refused(dlperf_main, two_runs):
    db, _, _ = two_runs
    res = dlperf_main("run", "smoke", "--quick", "--resume", "latest", db=db)
    assert_one_line_error(res, "cannot be resumed with smoke (quick)")


def test_resume_across_environments_is_refused(dlperf_main, two_runs):
    db, _, _ = two_runs
    # the same study with another thread count is another environment (threads are part of the fingerprint)
    # (the default thread count depends on the machine's load when a run starts: take another one than stored)
    stored = Store(db).run(Store(db).resolve_run("latest")).settings["threads"]
    other = 2 if stored == 1 else 1  # within the machine's cores (more are refused up front)
    res = dlperf_main("run", str(STUDIES / "many_ok.yaml"), "--resume", "latest", "--threads", str(other), db=db)
    assert_one_line_error(res, "was measured in another environment", "threads")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["frobnicate"], "No such command 'frobnicate'"),
        (["export", "x", "--format", "xml"], "Invalid value for '--format': 'xml' is not one of 'csv', 'json'"),
        (["run", "smoke", "--timeout", "-1"], "Invalid value for '--timeout'"),
        (["run", "smoke", "--threads", "0"], "Invalid value for '--threads'"),
        (["run", "smoke", "--threads", "9999"], "--threads 9999: this machine has"),
        (["run", "smoke", "--resume", "latest", "--new"], "--resume RUN continues a run and --new starts another"),
        (["run", "--wait-idle", "smoke"], "Invalid value for '--wait-idle'"),
        (["run", "smoke", "--precision", "0"], "Invalid value for '--precision'"),
        (["run", "smoke", "--precision", "nan"], "Invalid value for '--precision'"),
        (["run", "smoke", "--max-processes", "4"], "--max-processes and --precision-budget bound --precision"),
        (["run", "smoke", "--precision-budget", "60"], "--max-processes and --precision-budget bound --precision"),
        (["run", "smoke", "--precision", "5", "--max-processes", "1"], "Invalid value for '--max-processes'"),
        (["run", "smoke", "--precision", "5", "--max-processes", "2"], "2 is not in the range x>=3"),
        (["run", "smoke", "--precision", "5", "--executor", "dask", "--scheduler", "tcp://h:1"],
         "--precision runs more processes here"),
        (["maxbatch", "resnet"], "Invalid value for 'TARGET': 'resnet' is neither a CNN model"),
        (["maxbatch", "faults"], "Invalid value for 'TARGET': workload 'faults' has no memory axis"),
        (["maxbatch", "transformer", "-p", "model"], "'model' is not KEY=VALUE"),
        (["maxbatch", "transformer", "-p", "model=[a, b]"], "not a YAML list or mapping"),
        (["maxbatch", "transformer", "-p", "seq_len=8", "-p", "seq_len=16"], "-p seq_len is given twice"),
        (["maxbatch", "alexnet", "--mem-limit", "2XB"], "'2XB' is not a memory size"),
        (["hw", "list", "--sort", "colour"], "Invalid value for '--sort'"),
        (["recommend"], "give one of --workload FAMILY:MODEL (a CNN) or --model SOURCE"),
        (["show"], "Missing argument 'RUN'"),
    ],
)
def test_usage_errors_exit_2_before_any_work(args, fragment):
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output


def test_energy_estimate_needs_tdp(tmp_path):
    res = CliRunner().invoke(cli, ["run", "smoke", "--energy-estimate", "tdp", "--db", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2 and "--energy-estimate tdp needs --tdp-w WATTS" in res.output
    res = CliRunner().invoke(cli, ["run", "smoke", "--tdp-w", "65", "--db", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2 and "--tdp-w is only used with --energy-estimate tdp" in res.output


def test_every_command_is_registered():
    assert sorted(cli.commands) == ["bench", "bundle", "compare", "doctor", "export", "fleet", "history", "hw", "list",
                                    "matrix", "maxbatch", "peaks", "plan", "recommend", "report", "run", "runs",
                                    "serve", "show", "verdicts"]
    assert sorted(cli.commands["bundle"].commands) == ["export", "import"]
    assert sorted(cli.commands["fleet"].commands) == ["scheduler", "worker"]
    assert sorted(cli.commands["hw"].commands) == ["compare", "diff-study", "list", "measured", "show"]


@pytest.mark.parametrize(("content", "fragments"), [
    (b"name: a\nname: b\n", ("duplicate key 'name'", ":2:1")),
    (b"name: caf\xe9\n", ("not a UTF-8 text file",)),
    (b"name: x\nworkload: ops\nframeworks: [numpy]\nparams: {op: add, size_mb: 1}\nexclude:\n  - {nonexistent: 1}\n",
     ("exclude[0]: unknown key 'nonexistent'", "size_mb")),
])
def test_study_files_that_cannot_mean_what_they_say_are_refused(dlperf_main, tmp_path, content, fragments):
    study = tmp_path / "s.yaml"
    study.write_bytes(content)
    res = dlperf_main("run", str(study), db=tmp_path / "r.sqlite")
    assert_one_line_error(res, *fragments)
    assert res.returncode == 2 and not (tmp_path / "r.sqlite").exists()


def test_a_directory_is_not_a_study_file(dlperf_main, tmp_path):
    assert_one_line_error(dlperf_main("run", str(tmp_path), db=tmp_path / "r.sqlite"), "is a directory")


@pytest.mark.parametrize("content", [b"hello\n", b"x"], ids=["text file", "1-byte file"])
def test_a_file_that_is_not_a_database_is_refused_and_left_alone(dlperf_main, tmp_path, content):
    db = tmp_path / "r.sqlite"
    db.write_bytes(content)
    assert_one_line_error(dlperf_main("runs", db=db), "is not a SQLite database", "nothing was written")
    assert_one_line_error(dlperf_main("run", "smoke", "--quick", db=db), "is not a SQLite database")
    assert db.read_bytes() == content


def test_a_truncated_store_is_one_line_with_how_to_check_it(dlperf_main, two_runs, tmp_path):
    db, _, _ = two_runs
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(db.read_bytes()[:8192])
    res = dlperf_main("show", "latest", db=cut)
    assert_one_line_error(res, "cannot be read", "PRAGMA integrity_check")
    assert res.returncode == 2


def test_an_empty_run_reference_is_not_a_prefix_of_every_run(dlperf_main, two_runs):
    db, _, _ = two_runs
    assert_one_line_error(dlperf_main("show", "", db=db), "an empty run reference")


def test_an_unknown_device_is_named_as_such(dlperf_main, tmp_path):
    assert_one_line_error(dlperf_main("run", "smoke", "--quick", "--device", "tpu", db=tmp_path / "r.sqlite"),
                          "--device tpu: unknown device")


def test_the_default_store_is_a_scratch_one_and_its_use_is_caught(dlperf_main, default_store_unused,
                                                                   scratch_data_home, monkeypatch):
    """The CLI tests' guard itself: with no DLPERF_DB, a read command reaches the default store, which is under the
    scratch data folder (never the user's), and the guard saw it (cleared here, or this test would fail)."""
    import os

    assert "DLPERF_DB" not in os.environ and os.environ["XDG_DATA_HOME"] == str(scratch_data_home)
    expected = scratch_data_home / "dlperf" / "results.sqlite"
    assert_one_line_error(dlperf_main("runs"), f"no results store at {expected}")
    assert default_store_unused == [expected]
    default_store_unused.clear()
    monkeypatch.setenv("DLPERF_DB", str(scratch_data_home / "named.sqlite"))  # a named store is not the default
    assert_one_line_error(dlperf_main("runs"), "no results store at")
    assert default_store_unused == []
