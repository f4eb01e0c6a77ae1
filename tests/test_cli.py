"""The CLI as a user meets it: subprocesses, exit codes, stdout, and stderr that is one line or empty."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import STUDIES, run_cli


def assert_one_line_error(res, *fragments):
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("dlperf: error: "), lines[0]
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    for f in fragments:
        assert f in lines[0], lines[0]


def test_help_imports_no_framework_nor_store():
    code = ("import sys, dlperf.cli; "
            "heavy = [m for m in ('numpy', 'torch', 'tensorflow', 'jax', 'pytensor', 'sqlalchemy', 'pydantic', "
            "'scipy') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    res = run_cli("--help")
    assert res.returncode == 0 and "doctor" in res.stdout and res.stderr == ""


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
def test_bad_study_file(bad_dir, tmp_path, name, fragments):
    db = tmp_path / "r.sqlite"
    res = run_cli("run", str(bad_dir / name), db=db)
    assert_one_line_error(res, *fragments)
    assert res.returncode == 2


def test_database_from_newer_dlperf(tmp_path):
    db = tmp_path / "r.sqlite"
    assert run_cli("runs", db=db).returncode == 0  # creates the schema
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE dlperf_meta SET value='7' WHERE key='schema_version'"))
    engine.dispose()
    assert_one_line_error(run_cli("show", "latest", db=db), "schema version 7, newer than this dlperf reads")


def test_unknown_run_and_usage_errors(tmp_path):
    db = tmp_path / "r.sqlite"
    assert_one_line_error(run_cli("show", "latest", db=db), "no runs in")
    assert_one_line_error(run_cli("show", "nope", db=db), "unknown run 'nope'")
    assert_one_line_error(run_cli("run", "smoke", "--framework", "tourch", db=db), "unknown framework 'tourch'")
    assert_one_line_error(run_cli("run", "smoke", "--timeout", "-1", db=db), "--timeout")
    assert_one_line_error(run_cli("frobnicate", db=db), "No such command")
    assert_one_line_error(run_cli("export", "x", "--format", "xml", db=db), "--format")


def test_doctor_names_cpu_frameworks_and_missing_gpu_and_meters():
    from dlperf.hardware.probe import cpu_model

    res = run_cli("doctor")
    assert res.returncode == 0 and res.stderr == ""
    out = res.stdout
    assert cpu_model()[:30] in out
    assert "numpy" in out and "torch" in out
    import importlib.metadata as md

    assert md.version("numpy") in out and md.version("torch") in out
    from dlperf.hardware.probe import nvidia_gpus
    from dlperf.meters import JetsonMeter, NvmlMeter, RaplMeter

    if not nvidia_gpus()[0]:
        assert "no GPU available" in out
    states = [(m.name, *m.available()) for m in (RaplMeter(), NvmlMeter(), JetsonMeter())]
    for name, ok, why in states:
        line = next(x for x in out.splitlines() if f" {name} " in x)
        assert ("yes" if ok else "no") in line and why[:40] in line
    assert ("no energy meter available" in out) == (not any(ok for _, ok, _ in states))


def test_list_shows_studies_workloads_frameworks():
    res = run_cli("list")
    assert res.returncode == 0 and res.stderr == ""
    for word in ("smoke", "ops", "faults", "numpy", "torch"):
        assert word in res.stdout


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "r.sqlite"
    study = str(STUDIES / "many_ok.yaml")
    first = run_cli("run", study, "--budget", "0.2", db=db)
    second = run_cli("run", study, "--budget", "0.2", "--new", db=db)
    return db, first, second


def test_run_prints_table_and_location(two_runs):
    db, first, second = two_runs
    for res in (first, second):
        assert res.returncode == 0, res.stderr
        assert res.stderr == ""
        assert "12 of 12 cases stored" in res.stdout
        assert f"in sqlite:///{db}" in res.stdout
        assert "median" in res.stdout and "IQR" in res.stdout


def test_show_report_export_compare(two_runs, tmp_path):
    db, _, _ = two_runs
    show = run_cli("show", "latest", db=db)
    assert show.returncode == 0 and "many_ok" in show.stdout and show.stderr == ""

    md = run_cli("report", "latest", "--format", "markdown", db=db)
    assert md.returncode == 0 and md.stdout.startswith("# dlperf run `many_ok-")
    assert "| framework | device | params |" in md.stdout and "## Environment" in md.stdout

    csv_out = run_cli("export", "latest", "--format", "csv", db=db)
    lines = csv_out.stdout.strip().splitlines()
    assert lines[0].startswith("run_id,case_key,repetition") and len(lines) == 13

    out_file = tmp_path / "run.json"
    js = run_cli("export", "latest", "--format", "json", "-o", str(out_file), db=db)
    assert js.returncode == 0
    data = json.loads(out_file.read_text())
    assert len(data["results"]) == 12 and data["environment"]["cpu_model"]
    assert all(len(r["measurement"]["sample_times_s"]) == len(r["measurement"]["sample_iters"])
               for r in data["results"])

    runs = run_cli("runs", db=db)
    ids = [w for w in runs.stdout.split() if w.startswith("many_ok-")]
    assert len(ids) == 2
    cmp = run_cli("compare", ids[1], ids[0], db=db)
    assert cmp.returncode == 0, cmp.stderr
    assert cmp.stdout.count("ops/numpy/cpu/") == 12
    assert any(v in cmp.stdout for v in ("within noise", "faster", "slower"))
    assert "different environments" not in cmp.stdout  # same machine, same software


def test_rich_markup_in_data_is_printed_literally():
    # Install hints such as "pip install -e '.[gpu]'" contain brackets that rich would eat as markup.
    res = run_cli("doctor")
    assert "'.[gpu]'" in res.stdout


def test_resume_of_another_study_is_refused(two_runs):
    db, _, _ = two_runs
    res = run_cli("run", "smoke", "--quick", "--resume", "latest", db=db)
    assert_one_line_error(res, "cannot be resumed with smoke (quick)")


def test_unwritable_database_location(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_one_line_error(run_cli("runs", "--db", str(blocker / "sub" / "r.sqlite")), "cannot create the folder")


def test_resume_across_environments_is_refused(two_runs):
    db, _, _ = two_runs
    # the same study with another thread count is another environment (threads are part of the fingerprint)
    res = run_cli("run", str(STUDIES / "many_ok.yaml"), "--resume", "latest", "--threads", "1", db=db)
    assert_one_line_error(res, "was measured in another environment", "threads")
