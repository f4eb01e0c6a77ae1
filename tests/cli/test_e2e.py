"""The CLI as a user meets it, end to end: subprocesses, exit codes, stdout, and stderr that is one line or empty.
(Bad input is tested in-process in test_usage_errors.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dlperf.analysis.compare import VERDICTS
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error
from tests.conftest import CliResult, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def help_output() -> CliResult:
    """`dlperf --help`, run once for the tests that read it (the same command prints the same page)."""
    return run_cli("--help")


@pytest.fixture(scope="module")
def doctor_output() -> CliResult:
    """`dlperf doctor`, run once for the tests that read it (7.7 s of CPU a run on the 2-core VM): each test
    checks its own part of the one output, as each ran the same command before."""
    return run_cli("doctor")


def test_help_imports_no_framework_nor_store(help_output):
    code = ("import sys, dlperf.cli; "
            "heavy = [m for m in ('numpy', 'torch', 'tensorflow', 'jax', 'pytensor', 'sqlalchemy', 'pydantic', "
            "'scipy') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    res = help_output
    assert res.returncode == 0 and "doctor" in res.stdout and res.stderr == ""


def test_python_m_dlperf_is_the_same_command(help_output):
    env = dict(os.environ, COLUMNS="200")  # as run_cli sets it
    res = subprocess.run([sys.executable, "-m", "dlperf", "--help"], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout == help_output.stdout and help_output.returncode == 0
    version = subprocess.run([sys.executable, "-m", "dlperf", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("dlperf, version ")


def test_a_bad_argument_is_one_line_on_stderr(tmp_path):
    res = run_cli("show", "nope", db=tmp_path / "r.sqlite")
    assert_one_line_error(res, "no results store at")  # read-only commands never create one
    assert res.returncode == 2 and res.stdout == "" and not (tmp_path / "r.sqlite").exists()
    Store(tmp_path / "r.sqlite")
    res = run_cli("show", "nope", db=tmp_path / "r.sqlite")
    assert_one_line_error(res, "unknown run 'nope'")
    assert res.returncode == 2 and res.stdout == ""


def test_doctor_names_cpu_frameworks_and_missing_gpu_and_meters(doctor_output):
    from dlperf.hardware.probe import cpu_model

    res = doctor_output
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
    from dlperf.doctor import measured_one_core_speedup
    from dlperf.hardware.fma_peak import ONE_CORE_SPEEDUP_MIN
    from dlperf.hardware.noise import read_noise

    # the noise section: each setting as this machine's files read now, turbo with the machine's stored probe
    for item in read_noise(one_core_speedup=measured_one_core_speedup(), seen_from=ONE_CORE_SPEEDUP_MIN):
        line = next(x for x in out.splitlines() if f" {item.name} " in x)
        assert "noise" in line and item.state[:30] in line, line


def test_list_shows_studies_workloads_frameworks():
    res = run_cli("list")
    assert res.returncode == 0 and res.stderr == ""
    for word in ("smoke", "ops", "faults", "numpy", "torch"):
        assert word in res.stdout


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
    assert cmp.returncode == 0 and cmp.stderr == "", cmp.stderr
    assert cmp.stdout.count("ops/numpy/cpu/") == 12
    assert "different environments" not in cmp.stdout  # same machine, same software, the same --threads
    doc = json.loads(run_cli("compare", ids[1], ids[0], "--format", "json", db=db).stdout)
    assert doc["environment_diffs"] == [] and {s["by"] for s in doc["threads"].values()} == {"--threads"}
    # Each of the 12 cases is compared, or (a machine's background work, another dlperf run, kernel flushes)
    # contended on a side and not compared; either way both sides were measured, and what is said of it holds.
    cases = doc["cases"]
    assert len(cases) == 12
    for c in cases:
        assert c["median_a_s"] > 0 and c["median_b_s"] > 0, c
        if c["verdict"] in ("contended", "invalid"):  # not compared: a side's processes were all flagged so
            assert c["verdict"] in c["validity_a"] + c["validity_b"], c
            assert c["ratio"] is None and c["notes"] and all(n.startswith(("A: ", "B: ")) for n in c["notes"]), c
        else:
            assert c["verdict"] in ("no change", "inconclusive", "faster", "slower"), c
            assert c["processes_a"] == c["processes_b"] == 1 and 0 <= c["p_value"] <= 1, c
            assert c["ci_low"] <= c["ratio"] <= c["ci_high"], c
    counts = {v: sum(c["verdict"] == v for c in cases) for v in {c["verdict"] for c in cases}}
    assert doc["summary"]["counts"] == counts
    n_compared = 12 - counts.get("contended", 0) - counts.get("invalid", 0)
    assert doc["summary"]["n_compared"] == n_compared
    # the table's last line says the same: the geometric mean over the compared cases, or that none was compared
    listed = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v))
    last = cmp.stdout.rstrip().splitlines()[-1]
    if n_compared:
        assert last.startswith(f"geometric mean B/A over {n_compared} compared cases: "
                               f"{doc['summary']['geomean']:.3f}") and last.endswith(f"; {listed}"), last
    else:
        assert last == f"no case compared ({listed})", last
    # One process a side (the study's one repetition): each compared case is named as such, and the table says
    # what its interval leaves out.
    compared = [c["case_key"] for c in cases if c["verdict"] not in ("contended", "invalid")]
    assert doc["one_process_a_side"] == compared
    said = f"{n_compared} of the compared cases had one process a side: their intervals hold that process's"
    assert (said in cmp.stdout) == bool(n_compared), cmp.stdout


def test_rich_markup_in_data_is_printed_literally(doctor_output):
    # Install hints such as "pip install -e '.[gpu]'" contain brackets that rich would eat as markup.
    assert doctor_output.returncode == 0, doctor_output.stderr
    assert "'.[gpu]'" in doctor_output.stdout
