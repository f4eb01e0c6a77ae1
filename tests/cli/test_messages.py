"""Issue 14's output problems, each pinned: the run table's note column, `show --errors` / `--case` with stored
tracebacks, years in `hw show`, whole step counts, an oom reason in the case's own dtype, and a --mem-limit
below the framework's measured import footprint refused up front."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error

GOLDEN = Path(__file__).parents[1] / "golden" / "store-v1.db"
FAULTS = "faults-20261122-203705-263c"


@pytest.fixture
def golden_db(tmp_path: Path) -> Path:
    """A copy of the golden store: real runs, among them a faults run with failed cases and their tracebacks."""
    db = tmp_path / "golden.sqlite"
    shutil.copy(GOLDEN, db)
    return db


def test_the_note_column_is_not_squeezed_and_long_notes_are_whole_below(dlperf_main, golden_db):
    res = dlperf_main("show", FAULTS, db=golden_db)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) < 100  # was 269: every reason folded into 8-character pieces
    header = next(x for x in lines if "┃ framework" in x)
    note_width = len(header.split("┃")[-2])
    assert note_width >= 24 + 2, header  # the note column's minimum, plus its padding
    results = Store(golden_db).results(FAULTS)
    longest = max((r.reason or "" for r in results), key=len)
    assert len(longest) > 150
    whole = [x for x in lines if re.match(r"\[\d+\] ", x)]
    assert any(x.split("] ", 1)[1] == longest for x in whole)  # the longest reason, whole, under the table
    assert any(re.search(r"\.\.\. \[\d+\] +│$", x) for x in lines)  # its cell cut, pointing there
    assert f"8 failed cases: each one's whole reason and stored traceback: dlperf show {FAULTS} --errors" in lines


def test_show_errors_prints_each_failed_case_whole_with_its_traceback(dlperf_main, golden_db):
    res = dlperf_main("show", FAULTS, "--errors", db=golden_db)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    failed = [r for r in Store(golden_db).results(FAULTS) if r.status in ("error", "timeout", "oom", "crashed")]
    assert len(failed) == 8 and out.count("\ncase ") + out.startswith("case ") == 8
    for r in failed:
        assert f"case {r.case_key}: {r.status}\n  reason: {r.reason}\n" in out
        if r.m.traceback:  # stored by the worker: shown whole, each line indented
            assert all(f"    {t}" in out for t in r.m.traceback.rstrip().splitlines())
    assert "ValueError: deliberate failure from the faults workload" in out and "Traceback (most recent call" in out
    assert "traceback: none stored" in out  # the killed and timed-out workers left none
    assert "unsupported" not in out


def test_show_case_picks_cases_by_key_and_refuses_an_unknown_one(dlperf_main, golden_db):
    res = dlperf_main("show", FAULTS, "--case", "mode=raise", db=golden_db)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("case faults/") == 2  # on cpu (error, with a traceback) and on cuda (unsupported)
    assert "Traceback (most recent call last)" in res.stdout and ": unsupported" in res.stdout
    assert_one_line_error(dlperf_main("show", FAULTS, "--case", "mode=nothing", db=golden_db),
                          "--case 'mode=nothing': no case of run", f"dlperf export {FAULTS}")
    smoke = dlperf_main("show", "smoke-20261122-203532-fdee", "--errors", db=golden_db)
    assert smoke.returncode == 0 and smoke.stdout == "no failed case in run smoke-20261122-203532-fdee\n"


def test_years_print_plain(dlperf_main):
    res = dlperf_main("hw", "show", "gtx-1070")
    assert re.search(r"│ launch_year +│ 2016 ", res.stdout), res.stdout
    res = dlperf_main("hw", "compare", "gtx-1070", "l4")
    assert re.search(r"│ launch_year +│ +2016 +│ +2023 │", res.stdout), res.stdout
    assert "2,0" not in res.stdout


def test_steps_are_counted_whole():
    from dlperf.report.backends_report import steps_timed

    assert steps_timed([12, 13]) == "12 to 13 steps per case"  # the median of these is 12.5: not a step count
    assert steps_timed([12, 12, 12]) == "12 steps" and steps_timed([1]) == "1 step"
    assert steps_timed([None]) == "an unknown number of steps"


def test_an_oom_reason_speaks_the_cases_dtype():
    from dlperf.runner.worker import oom_reason

    err = MemoryError("Unable to allocate 1.95 GiB for an array with shape (524288000,) and data type float32")
    assert oom_reason(err, "float16").endswith("(a float32 intermediate of this float16 case, not one of its "
                                               "float16 arrays)")
    assert oom_reason(err, "float32") == f"MemoryError: {err}"
    assert oom_reason(MemoryError("out of memory"), "float32") == "MemoryError: out of memory"


def test_a_float32_case_runs_out_of_memory_in_float32(tmp_path):
    """A real sweep: arrays of 1000 MiB each under a 300 MiB cap; the stored reason names the arrays the case
    builds (float32), not a float64 temporary; a float16 case's float32 inputs are named as intermediates."""
    from tests.conftest import run_cli

    study = tmp_path / "oom.yaml"
    study.write_text("name: oom_dtype\nworkload: ops\nframeworks: [numpy]\n"
                     "params: {op: add, size_mb: 3000, dtype: [float32, float16]}\n")
    db = tmp_path / "r.sqlite"
    res = run_cli("run", str(study), "--mem-limit", "300MiB", "--threads", "1", db=db)
    assert res.returncode == 0, res.stderr
    rows = {r.params["dtype"]: r for r in Store(db).results(Store(db).resolve_run("latest"))}
    assert {d: r.status for d, r in rows.items()} == {"float32": "oom", "float16": "oom"}
    assert "float32" in rows["float32"].reason and "float64" not in rows["float32"].reason
    assert "float64" not in rows["float16"].reason
    assert rows["float16"].reason.endswith("(a float32 intermediate of this float16 case, not one of its float16 "
                                           "arrays)"), rows["float16"].reason


@pytest.mark.parametrize("args", [["run", "smoke", "--quick"], ["run", "smoke", "--quick", "--framework", "numpy"]])
def test_a_mem_limit_below_the_import_footprint_is_refused_up_front(dlperf_main, tmp_path, args):
    db = tmp_path / "r.sqlite"
    res = dlperf_main(*args, "--mem-limit", "1", "--threads", "1", db=db)
    assert_one_line_error(res, "--mem-limit 1 MiB is below what a worker needs just to import numpy",
                          "MiB of data memory with 1 thread (measured now")
    assert res.returncode == 2 and not db.exists()


def test_the_import_footprint_is_what_the_cap_must_exceed():
    """The measured figure predicts the cap: a fresh process importing numpy under a cap just below it fails,
    one just above it succeeds."""
    import os
    import subprocess
    import sys

    from dlperf.hardware.probe import env_threads_vars
    from dlperf.runner.footprint import measure
    from dlperf.units import MIB_BYTES

    fp = measure("numpy", 1)
    assert fp.framework == "numpy" and fp.version and fp.threads == 1
    assert 5 * MIB_BYTES < fp.peak_rss_bytes and fp.data_bytes > 10 * MIB_BYTES
    code = ("import resource, sys; cap = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))\n"
            "from dlperf.runner.footprint import main; main(['', 'numpy'])")
    env = os.environ | env_threads_vars(1)
    below = subprocess.run([sys.executable, "-c", code, str(fp.data_bytes - 8 * MIB_BYTES)], capture_output=True,
                           text=True, env=env)
    above = subprocess.run([sys.executable, "-c", code, str(fp.data_bytes + 8 * MIB_BYTES)], capture_output=True,
                           text=True, env=env)
    assert '"data_bytes"' not in below.stdout  # failed: an error line, or the process died
    assert '"data_bytes"' in above.stdout, above.stderr


def test_a_footprint_that_cannot_be_measured_is_one_warning(monkeypatch):
    from dlperf.runner import footprint

    def unmeasurable(name: str, threads: int) -> footprint.Footprint:
        raise footprint.FootprintUnknown("importing it took over 120 s")

    monkeypatch.setattr(footprint, "measure", unmeasurable)
    warned: list[str] = []
    assert footprint.refuse_caps_below_imports(["numpy"], 1, 1, source="--mem-limit 1 MiB", warn=warned.append) == []
    assert warned == ["cannot measure what importing numpy needs (importing it took over 120 s); --mem-limit 1 MiB "
                      "is not checked against it"]


def test_maxbatch_refuses_a_cap_below_what_importing_torch_needs(dlperf_main, tmp_path):
    pytest.importorskip("torch")
    db = tmp_path / "r.sqlite"
    res = dlperf_main("maxbatch", "lenet5", "--mem-limit", "100MiB", db=db)
    assert_one_line_error(res, "--mem-limit 100 MiB is below what a worker needs just to import torch")
    assert res.returncode == 2 and not db.exists()


def test_hw_measured_notes_one_line_per_device_with_each_source_once():
    from dlperf.cli.hw import device_notes

    def row(device: str, power: str) -> dict:
        return {"device": device, "power_source": power, "price_source": "unknown", "peak_source": "2 cores x 4 GHz"}

    lines = device_notes([row("cpu-a", "no meter (energy: false)"), row("cpu-a", "no meter (no RAPL)"),
                          row("cpu-a", "no meter (energy: false)"), row("gpu-b", "measured (nvml)")])
    assert lines == ["cpu-a: power: no meter (energy: false) | no meter (no RAPL); price: unknown; "
                     "peak: 2 cores x 4 GHz",
                     "gpu-b: power: measured (nvml); price: unknown; peak: 2 cores x 4 GHz"]
