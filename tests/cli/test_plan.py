"""`dlperf plan` and `dlperf run`'s case limit: the cases a study expands to, their count, an estimate of their
time from the stored wall times of the same cases (labelled, never invented), a time-out bound; `run` refuses a
study over the limit before doing anything, in a fraction of a second even for a grid of 10^6 points."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlperf.cli import cli
from dlperf.store import Store
from tests.cli.conftest import assert_one_line_error
from tests.conftest import STUDIES, CliResult

AXIS = "[" + ", ".join(str(i) for i in range(1, 33)) + "]"
#: 32^4 = 1,048,576 distinct points (n x d_in x h x d_out of the mlp grid): building them took minutes and GBs.
HUGE = (f"name: huge\nworkload: mlp\nframeworks: [numpy]\n"
        f"params: {{variant: tensors, size: custom, n: {AXIS}, d_in: {AXIS}, h: {AXIS}, d_out: {AXIS}}}\n")
SMALL = "name: small\nworkload: ops\nframeworks: [numpy]\nparams: {op: add, size_mb: 1}\n"


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


#: `dlperf ARGS` that writes its own peak RSS (VmHWM of its address space, which exec starts afresh: the rusage
#: of a child forked from pytest would count pytest's pages) to the file named by $PEAK_FILE on exit.
MEASURED = """
import atexit, os, sys
def peak():
    with open("/proc/self/status") as status, open(os.environ["PEAK_FILE"], "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])
atexit.register(peak)
from dlperf.cli import main
main(sys.argv[1:])
"""


def run_measured(tmp_path: Path, *args: str) -> tuple[CliResult, float, int]:
    """`dlperf ARGS` in a subprocess: its result, the CPU seconds it used (its own, from wait4: the machine's
    load does not count) and its peak RSS in bytes. Killed after 120 s (the old expansion spun for minutes)."""
    out, err, peak = tmp_path / "out.txt", tmp_path / "err.txt", tmp_path / "peak.txt"
    env = dict(os.environ, COLUMNS="200", DLPERF_DB=str(tmp_path / "r.sqlite"), PEAK_FILE=str(peak))
    with out.open("w") as fo, err.open("w") as fe:
        proc = subprocess.Popen([sys.executable, "-c", MEASURED, *args], stdout=fo, stderr=fe, env=env, cwd=tmp_path)
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    _, status, usage = os.wait4(proc.pid, 0)
    watchdog.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    result = CliResult(proc.returncode, out.read_text(), err.read_text())
    return result, usage.ru_utime + usage.ru_stime, int(peak.read_text()) * 1024


def test_plan_lists_counts_and_says_there_is_no_store(dlperf_main, tmp_path):
    db = tmp_path / "r.sqlite"
    res = dlperf_main("plan", "smoke", "--quick", db=db)
    assert res.returncode == 0 and res.stderr == ""
    out = res.stdout
    assert "6 cases x 2 repetitions = 12 case-repetitions" in out
    assert "cases per framework and device: numpy cpu 3, torch cpu 3" in out
    assert f"estimate: none, no stored timings (no results store at {db})" in out
    assert ("at most 60 min in workers by the time-outs (12 case-repetitions x 300 s each; not an estimate; "
            "memory re-checks and start-up come on top)") in out
    assert not db.exists()  # read-only: never creates a store


def test_the_estimate_is_the_median_stored_wall_time_of_each_case(dlperf_main, two_runs):
    db, _, _ = two_runs  # many_ok.yaml run twice with --budget 0.2
    store = Store(db)
    walls: dict[str, list[float]] = {}
    for run in store.list_runs(limit=1000):
        if run.study != "many_ok" or run.settings["budget_s"] != 0.2:
            continue  # (a run another test may add with other settings is not the plan's)
        for row in store.results(run.id):
            walls.setdefault(row.case_key, []).append(row.wall_s)
    expected_s = sum(statistics.median(w) for w in walls.values())
    res = dlperf_main("plan", str(STUDIES / "many_ok.yaml"), "--budget", "0.2", "--format", "json", db=db)
    assert res.returncode == 0 and res.stderr == ""
    plan = json.loads(res.stdout)
    est = plan["estimate"]
    assert est["label"].startswith("estimate")
    assert est["seconds"] == pytest.approx(expected_s, rel=1e-12)
    assert (est["case_repetitions_estimated"], est["cases_without_stored_time"]) == (12, 0)
    assert all(r["stored_repetitions"] == 2 for r in plan["rows"]) and len(plan["rows"]) == 12
    text = dlperf_main("plan", str(STUDIES / "many_ok.yaml"), "--budget", "0.2", db=db).stdout
    assert "estimate: " in text and "in workers for 12 of 12 case-repetitions" in text
    # the study's own budget (0.05 s) is not what was stored: no estimate, and why
    plan = json.loads(dlperf_main("plan", str(STUDIES / "many_ok.yaml"), "--format", "json", db=db).stdout)
    assert plan["estimate"]["seconds"] is None
    assert plan["estimate"]["cases_timed_only_elsewhere"] == plan["estimate"]["cases_without_stored_time"] == 12


def test_a_long_plan_shows_both_ends_and_all_of_it_with_all(dlperf_main, tmp_path):
    sizes = ", ".join(str(i) for i in range(1, 31))
    study = write(tmp_path, f"name: long\nworkload: ops\nframeworks: [numpy]\n"
                            f"params: {{op: add, size_mb: [{sizes}]}}\n")
    out = dlperf_main("plan", str(study), db=tmp_path / "r.sqlite").stdout
    assert "30 cases x 1 repetition = 30 case-repetitions" in out
    assert "10 more cases (--all lists them)" in out
    assert "size_mb=10.0 " in out and "size_mb=11.0 " not in out and "size_mb=20.0 " not in out
    assert "size_mb=21.0 " in out and "size_mb=30.0 " in out
    out = dlperf_main("plan", str(study), "--all", db=tmp_path / "r.sqlite").stdout
    assert "more cases" not in out and all(f"size_mb={i}.0 " in out for i in range(1, 31))


@pytest.fixture(scope="module")
def startup_cpu_s(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The CPU seconds of `dlperf plan` on a one-case study, measured as the huge grid's commands are: what
    starting dlperf (Python, its imports, the study's load) costs on this machine. The huge grid's bounds are in
    this unit: an absolute bound tuned here (0.87 s of a 2.0 s bound on the AMD VM) is a speed target that a CPU
    1.9x slower per core, or a VM whose neighbours slow each process, comes close to or passes, while the
    defect they guard (building the 10^6 cases) cost minutes, hundreds of times this unit on any machine."""
    folder = tmp_path_factory.mktemp("startup")
    res, cpu_s, _ = run_measured(folder, "plan", str(write(folder, SMALL)))
    assert res.returncode == 0, res.stderr
    return cpu_s


def test_run_refuses_a_huge_grid_at_once(tmp_path, startup_cpu_s):
    study = write(tmp_path, HUGE)
    res, cpu_s, rss_bytes = run_measured(tmp_path, "run", str(study))
    assert_one_line_error(res, "huge (full) expands to more than 20,000 (at most 1,048,576) case-repetitions",
                          "over the limit 5,000", f"dlperf plan {study}", "--max-cases N")
    assert res.returncode == 2 and res.stdout == ""
    # 0.87 s against a one-case plan's 0.64 s on the 2-core AMD VM: the refusal costs about a start-up
    assert cpu_s < 3 * startup_cpu_s, (cpu_s, startup_cpu_s)
    assert rss_bytes < 250 * 2**20, rss_bytes
    assert not (tmp_path / "r.sqlite").exists()


def test_plan_counts_a_huge_grid_without_building_it(tmp_path, startup_cpu_s):
    res, cpu_s, rss_bytes = run_measured(tmp_path, "plan", str(write(tmp_path, HUGE)))
    assert res.returncode == 0 and res.stderr == ""
    assert "more than 100,000 case-repetitions (at most 1,048,576" in res.stdout
    assert "more cases (too many to list)" in res.stdout
    assert "over `dlperf run`'s limit of 5,000 case-repetitions" in res.stdout
    # building the 10^6 cases took minutes; counting 10^5 points is about a second more than a start-up (1.63 s
    # against a one-case plan's 0.64 s on the 2-core AMD VM)
    assert cpu_s < 8 * startup_cpu_s, (cpu_s, startup_cpu_s)
    assert rss_bytes < 250 * 2**20, rss_bytes


def test_run_names_the_count_and_the_limit(dlperf_main, tmp_path):
    from dlperf.cli.execute import check_case_limit
    from dlperf.studies import load_study

    study = write(tmp_path, SMALL + "repetitions: 5001\n")
    res = dlperf_main("run", str(study), "--quick", db=tmp_path / "r.sqlite")
    assert_one_line_error(res, "no 'quick' variant")
    res = dlperf_main("run", str(study), db=tmp_path / "r.sqlite")
    assert_one_line_error(res, "small (full) expands to 5,001 case-repetitions, over the limit 5,000")
    assert res.returncode == 2 and not (tmp_path / "r.sqlite").exists()
    check_case_limit(str(study), load_study(str(study)), [], [], 5001)  # --max-cases 5001: allowed
    res = dlperf_main("run", str(STUDIES / "many_ok.yaml"), "--max-cases", "5", db=tmp_path / "r.sqlite")
    assert_one_line_error(res, "expands to 12 case-repetitions, over --max-cases 5")


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize(("gpus", "visible", "device", "fragment"), [
    ([], None, "cuda:7", "--device cuda:7: cuda:7 is not on this machine: it has no CUDA device"),
    ([], None, "cuda", "--device cuda: cuda is not on this machine: it has no CUDA device"),
    (["A"], None, "cuda:7", "--device cuda:7: cuda:7 is not on this machine: it has 1 CUDA device (cuda:0)"),
    (["A", "B"], None, "cuda:2", "it has 2 CUDA devices (cuda:0, cuda:1)"),
    (["A", "B"], "", "cuda:0", "it has no CUDA device"),
    (["A", "B"], "1", "cuda:1", "it has 1 CUDA device (cuda:0)"),
    (["A"], None, "cuda:0", "smoke: no case matches --framework * --device cuda:0"),  # present, not in the study
])
def test_an_absent_device_is_named_as_absent(dlperf_main, tmp_path, monkeypatch, command, gpus, visible, device,
                                             fragment):
    from dlperf.hardware import probe

    monkeypatch.setattr(probe, "nvidia_gpus", lambda: ([{"index": i, "name": n} for i, n in enumerate(gpus)],
                                                       "nvml" if gpus else "no NVIDIA driver"))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    res = dlperf_main(command, "smoke", "--quick", "--device", device, db=tmp_path / "r.sqlite")
    assert_one_line_error(res, fragment)
    assert res.returncode == 2 and not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize(("args", "fragment"), [
    (["run", "smoke", "--retry-failed", "--new"], "--retry-failed runs again the failed cases of an unfinished run"),
    (["run", "smoke", "--steps", "3", "--budget", "1"], "--steps times a fixed number of calls and --budget"),
    (["plan", "smoke", "--steps", "3", "--budget", "1"], "--steps times a fixed number of calls and --budget"),
    (["run", "smoke", "--max-cases", "0"], "Invalid value for '--max-cases'"),
    (["plan", "smoke", "--format", "xml"], "Invalid value for '--format'"),
    (["plan", "smoke", "--timeout", "nan"], "'nan' is not a finite number"),
])
def test_conflicting_options_are_refused_before_any_work(tmp_path, args, fragment):
    res = CliRunner().invoke(cli, [*args, "--db", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize(("args", "fragments"), [
    (["plan", "no_such_study"], ["no_such_study: no such study"]),
    (["plan", "smoke", "--framework", "tourch"], ["--framework: unknown framework 'tourch'"]),
    (["plan", "smoke", "--device", "tpu"], ["--device tpu: unknown device"]),
    (["plan", "smoke", "--framework", "jax"], ["smoke: no case matches --framework jax"]),
])
def test_plan_bad_input_is_one_line(dlperf_main, tmp_path, args, fragments):
    res = dlperf_main(*args, db=tmp_path / "r.sqlite")
    assert_one_line_error(res, *fragments)
    assert res.returncode == 2 and res.stdout == ""


def test_every_command_has_help():
    def walk(group, path):
        for name, command in group.commands.items():
            yield [*path, name], command
            if hasattr(command, "commands"):
                yield from walk(command, [*path, name])

    commands = list(walk(cli, []))
    assert ["plan"] in [path for path, _ in commands]
    for path, command in commands:
        res = CliRunner().invoke(cli, [*path, "--help"])
        assert res.exit_code == 0, (path, res.output)
        assert (command.help or "").strip(), path


def test_durations_read_as_a_person_reads_them():
    from dlperf.cli.plan import _duration

    assert [_duration(t) for t in (None, 0.0123, 3.96, 42, 130, 3600, 3 * 86400)] == [
        "-", "0.012 s", "4.0 s", "42 s", "2.2 min", "60 min", "3 days"]


def test_cases_that_never_ran_give_no_estimate(dlperf_main, two_runs, tmp_path):
    """A case skipped after an oom (stored with wall_s 0) or `unsupported` at once was never timed: it has no
    estimate rather than an estimate of 0 s; a run with --counters (profiled) is not timed like a plain one."""
    import shutil

    from sqlalchemy import create_engine, text

    source, _, _ = two_runs
    db = tmp_path / "copy.sqlite"
    shutil.copy(source, db)
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        keys = [r[0] for r in conn.execute(text("SELECT DISTINCT case_key FROM results ORDER BY case_key"))]
        conn.execute(text("UPDATE results SET wall_s = 0 WHERE case_key = :k"), {"k": keys[0]})
        conn.execute(text("UPDATE results SET status = 'unsupported' WHERE case_key = :k"), {"k": keys[1]})
    engine.dispose()
    plan = json.loads(dlperf_main("plan", str(STUDIES / "many_ok.yaml"), "--budget", "0.2", "--format", "json",
                                  db=db).stdout)
    assert plan["estimate"]["cases_without_stored_time"] == 2
    assert plan["estimate"]["case_repetitions_estimated"] == 10
    with create_engine(f"sqlite:///{db}").begin() as conn:
        conn.execute(text("""UPDATE runs SET filters = json_set(filters, '$.counters', json('true'))"""))
    plan = json.loads(dlperf_main("plan", str(STUDIES / "many_ok.yaml"), "--budget", "0.2", "--format", "json",
                                  db=db).stdout)
    assert plan["estimate"]["seconds"] is None and plan["estimate"]["cases_without_stored_time"] == 12
